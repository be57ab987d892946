// Finds plugin libraries, checks their ABI before running any of their code, loads them and
// creates plugin instances by kind and name.
#ifndef TITAN_CORE_RUNTIME_PLUGIN_REGISTRY_H_
#define TITAN_CORE_RUNTIME_PLUGIN_REGISTRY_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "titan/plugin.h"
#include "titan/status.h"

namespace titan {

struct PluginInfo {
  const PluginDescriptor* descriptor = nullptr;
  std::filesystem::path path;  // empty for plugins built into the core
  std::string location() const { return path.empty() ? "<built-in>" : path.string(); }
  // "optimizer plugin 'adamw' (/path/titan_optimizer_adamw.so)", for errors.
  std::string Describe() const;
};

// A file on the plugin path that could not be loaded, and why (the reason names the file).
struct RejectedPlugin {
  std::filesystem::path path;
  std::string reason;
};

// Runs `call` (`what`: "Configure", ...) on the plugin `info`. The contract forbids exceptions
// across the boundary; one that escapes anyway becomes an error naming the plugin.
absl::Status CallPlugin(const PluginInfo& info, absl::string_view what,
                        absl::FunctionRef<absl::Status()> call);

// The plugin whose instance (made by Instantiate) is the object at `whole_object` (the address
// dynamic_cast<const void*> gives for the plugin or one of its roles), as PluginInfo::Describe
// says it; "a plugin" for an object Instantiate did not make.
std::string DescribePluginAt(const void* whole_object);
// CallPlugin for a call into the object at `whole_object`: an escaping exception names its plugin.
absl::Status CallPluginAt(const void* whole_object, absl::string_view what,
                          absl::FunctionRef<absl::Status()> call);

// Runs `call` (a call named `what` into the plugin instance at `whole_object`, or into something
// it made, such as a comm plugin's communicator; it returns a Status or a StatusOr) and returns
// its result; an exception that escapes it is an error naming the plugin and its file, as
// CallPlugin makes.
template <typename Call>
auto CallPluginAtOf(const void* whole_object, absl::string_view what, Call&& call)
    -> decltype(call()) {
  decltype(call()) result = absl::UnknownError(absl::StrCat(what, " did not return"));
  absl::Status guarded = CallPluginAt(whole_object, what, [&] {
    result = call();
    return absl::OkStatus();
  });
  if (!guarded.ok()) return guarded;
  return result;
}

// CallPluginAtOf for a call into `object`, a plugin instance or one of its roles.
template <typename Object, typename Call>
auto CallPluginOf(Object& object, absl::string_view what, Call&& call) -> decltype(call()) {
  return CallPluginAtOf(dynamic_cast<const void*>(&object), what, std::forward<Call>(call));
}

// A new instance of the plugin `info` through its factory; a null result or an exception is an
// error naming the plugin and its file.
absl::StatusOr<std::unique_ptr<Plugin>> Instantiate(const PluginInfo& info);

// The recipe keys `plugin`, an instance of `info`, declares (Plugin::ConfigKeys), guarded so.
absl::StatusOr<std::vector<ConfigKey>> DeclaredKeys(const PluginInfo& info, const Plugin& plugin);

// Reads a library's ABI version from its symbol table without loading it. Errors name the
// file: not a shared library, no titan entry point, or an ABI other than this build's.
absl::StatusOr<uint32_t> ReadPluginAbi(const std::filesystem::path& file);

// The plugin directories in discovery order: `flag_dirs` (--plugin-dir), then the entries of
// `env_path` (TITAN_PLUGIN_PATH, ':'-separated), then the directory beside `executable` where
// the build tree and an install prefix both keep plugins. Duplicates are dropped.
absl::StatusOr<std::vector<std::filesystem::path>> PluginSearchDirs(
    const std::vector<std::string>& flag_dirs, absl::string_view env_path,
    const std::filesystem::path& executable);

class PluginRegistry {
 public:
  // Registers the core's built-in plugins, then loads every titan_*.so in `dirs`. A file that
  // cannot be loaded is skipped and listed in rejected() (for the caller to warn about); asking
  // for it by kind and name is then the error. Fails only on two plugins of the same kind and
  // name, or an unreadable folder.
  static absl::StatusOr<std::unique_ptr<PluginRegistry>> Discover(
      const std::vector<std::filesystem::path>& dirs);

  const std::vector<PluginInfo>& plugins() const { return plugins_; }
  const std::vector<RejectedPlugin>& rejected() const { return rejected_; }

  // The plugin of `kind` named `name` (case-insensitive); the error lists those available
  // and suggests the closest, or names the file titan_<kind>_<name>.so and why it was rejected.
  absl::StatusOr<const PluginInfo*> Find(absl::string_view kind, absl::string_view name) const;

  template <typename Interface>
  absl::StatusOr<std::unique_ptr<Interface>> Create(absl::string_view name) const {
    TITAN_ASSIGN_OR_RETURN(const PluginInfo* info, Find(PluginKind<Interface>::kName, name));
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Plugin> plugin, Instantiate(*info));
    return std::unique_ptr<Interface>(static_cast<Interface*>(plugin.release()));
  }

  // Create, then Configure with `config`; an exception from either names the plugin.
  template <typename Interface>
  absl::StatusOr<std::unique_ptr<Interface>> CreateConfigured(absl::string_view name,
                                                              const ConfigView& config) const {
    TITAN_ASSIGN_OR_RETURN(const PluginInfo* info, Find(PluginKind<Interface>::kName, name));
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Interface> plugin, Create<Interface>(name));
    TITAN_RETURN_IF_ERROR(
        CallPlugin(*info, "Configure", [&] { return plugin->Configure(config); }));
    return plugin;
  }

 private:
  absl::Status Add(PluginInfo info);
  absl::Status LoadFile(const std::filesystem::path& file);

  std::vector<PluginInfo> plugins_;
  std::vector<RejectedPlugin> rejected_;
};

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_PLUGIN_REGISTRY_H_
