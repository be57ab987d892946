// The plugin base class, the descriptor every plugin library exports, and the macro that
// exports it. A plugin library is `titan_<kind>_<name>.so` built with titan_add_plugin().
#ifndef TITAN_PLUGIN_H_
#define TITAN_PLUGIN_H_

#include <boost/dll/alias.hpp>
#include <cstdint>
#include <vector>

#include "titan/abi.h"
#include "titan/config_view.h"
#include "titan/kernel_table.h"
#include "titan/status.h"

namespace titan {

class Plugin {
 public:
  virtual ~Plugin() = default;

  // The keys this plugin accepts in the recipe section that selects it.
  virtual std::vector<ConfigKey> ConfigKeys() const { return {}; }

  // Called once with the validated section before any other call.
  virtual absl::Status Configure(const ConfigView& /*config*/) { return absl::OkStatus(); }
};

// Read by the loader straight after the ABI check; plain data and one factory.
struct PluginDescriptor {
  uint32_t abi_version;
  const char* kind;  // "parallel", "optimizer", "float8", "checkpoint", "comm", "device", "balance"
  const char* name;  // unique within its kind, e.g. "adamw"
  const char* version;    // semantic version of the plugin itself, e.g. "1.0.0"
  const char* summary;    // one line
  Plugin* (*create)();    // a new instance; the caller owns it
  uint64_t kernel_table;  // the fingerprint of the kernel table it was built with (kernel_table.h)
};

// Maps each plugin interface to its kind name; specialised in the kind headers.
template <typename Interface>
struct PluginKind;

}  // namespace titan

#define TITAN_PLUGIN_CONCAT_INNER_(a, b) a##b
#define TITAN_PLUGIN_CONCAT_(a, b) TITAN_PLUGIN_CONCAT_INNER_(a, b)
#define TITAN_PLUGIN_SYMBOL_ TITAN_PLUGIN_CONCAT_(titan_plugin_abi_, TITAN_ABI_VERSION)

// Exports the descriptor of a plugin. Use once per library, at namespace scope:
//   TITAN_PLUGIN(titan::OptimizerPlugin, AdamW, "adamw", "1.0.0", "AdamW with decoupled decay")
#define TITAN_PLUGIN(Interface, Impl, plugin_name, plugin_version, plugin_summary) \
  namespace titan_plugin_export_ {                                                 \
  static ::titan::Plugin* Create() { return static_cast<Interface*>(new Impl()); } \
  const ::titan::PluginDescriptor kDescriptor = {                                  \
      .abi_version = TITAN_ABI_VERSION,                                            \
      .kind = ::titan::PluginKind<Interface>::kName,                               \
      .name = plugin_name,                                                         \
      .version = plugin_version,                                                   \
      .summary = plugin_summary,                                                   \
      .create = &Create,                                                           \
      .kernel_table = ::titan::kKernelTableFingerprint};                           \
  }                                                                                \
  BOOST_DLL_ALIAS_SECTIONED(titan_plugin_export_::kDescriptor, TITAN_PLUGIN_SYMBOL_, titan)

#endif  // TITAN_PLUGIN_H_
