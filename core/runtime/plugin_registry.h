// Finds plugin libraries, checks their ABI before running any of their code, loads them and
// creates plugin instances by kind and name.
#ifndef TITAN_CORE_RUNTIME_PLUGIN_REGISTRY_H_
#define TITAN_CORE_RUNTIME_PLUGIN_REGISTRY_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/plugin.h"
#include "titan/status.h"

namespace titan {

struct PluginInfo {
  const PluginDescriptor* descriptor = nullptr;
  std::filesystem::path path;  // empty for plugins built into the core
  std::string location() const { return path.empty() ? "<built-in>" : path.string(); }
};

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
  // Registers the core's built-in plugins, then loads every titan_*.so in `dirs`. Every bad
  // file is reported, each with its path and what is wrong with it.
  static absl::StatusOr<std::unique_ptr<PluginRegistry>> Discover(
      const std::vector<std::filesystem::path>& dirs);

  const std::vector<PluginInfo>& plugins() const { return plugins_; }

  // The plugin of `kind` named `name` (case-insensitive); the error lists those available
  // and suggests the closest.
  absl::StatusOr<const PluginInfo*> Find(absl::string_view kind, absl::string_view name) const;

  template <typename Interface>
  absl::StatusOr<std::unique_ptr<Interface>> Create(absl::string_view name) const {
    TITAN_ASSIGN_OR_RETURN(const PluginInfo* info, Find(PluginKind<Interface>::kName, name));
    return std::unique_ptr<Interface>(static_cast<Interface*>(info->descriptor->create()));
  }

 private:
  absl::Status Add(PluginInfo info);
  absl::Status LoadFile(const std::filesystem::path& file);

  std::vector<PluginInfo> plugins_;
};

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_PLUGIN_REGISTRY_H_
