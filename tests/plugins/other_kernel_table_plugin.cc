// A device plugin of this titan's ABI number built against another kernel table, as one built
// from an SDK whose titan/compute_kernels.inc was edited without a new ABI number would be.
#include "titan/plugin.h"

namespace {

titan::Plugin* Create() { return nullptr; }

const titan::PluginDescriptor kDescriptor = {TITAN_ABI_VERSION,
                                             "device",
                                             "othertable",
                                             "0.0.1",
                                             "built against another kernel table",
                                             &Create,
                                             titan::kKernelTableFingerprint + 1};

}  // namespace

BOOST_DLL_ALIAS_SECTIONED(kDescriptor, TITAN_PLUGIN_SYMBOL_, titan)
