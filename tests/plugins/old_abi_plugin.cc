// A plugin whose descriptor claims the ABI before this titan's, as one built against an older SDK.
#include "titan/optimizer.h"

#define TITAN_OLD_ABI_SYMBOL_(n) titan_plugin_abi_##n
#define TITAN_OLD_ABI_SYMBOL(n) TITAN_OLD_ABI_SYMBOL_(n)

namespace {

titan::Plugin* Create() { return nullptr; }

const titan::PluginDescriptor kDescriptor = {TITAN_OLD_ABI,
                                             "optimizer",
                                             "oldabi",
                                             "0.0.1",
                                             "built for the previous ABI",
                                             &Create,
                                             titan::kKernelTableFingerprint};

}  // namespace

BOOST_DLL_ALIAS_SECTIONED(kDescriptor, TITAN_OLD_ABI_SYMBOL(TITAN_OLD_ABI), titan)
