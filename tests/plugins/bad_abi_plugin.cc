// A plugin whose descriptor claims ABI 999, as one built against a future SDK would.
#include "titan/optimizer.h"

namespace {

titan::Plugin* Create() { return nullptr; }

const titan::PluginDescriptor kDescriptor = {999,
                                             "optimizer",
                                             "badabi",
                                             "9.9.9",
                                             "built for another ABI",
                                             &Create,
                                             titan::kKernelTableFingerprint};

}  // namespace

BOOST_DLL_ALIAS_SECTIONED(kDescriptor, titan_plugin_abi_999, titan)
