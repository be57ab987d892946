#include "core/runtime/plugin_registry.h"

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <exception>
#include <mutex>
#include <system_error>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "core/runtime/builtin_plugins.h"
#include "core/runtime/closest_name.h"
#include "core/runtime/elf_symbols.h"

namespace titan {
namespace fs = std::filesystem;

namespace {

constexpr absl::string_view kKinds[] = {"parallel", "optimizer", "float8", "checkpoint",
                                        "comm",     "device",    "balance"};

// Plugins stay loaded until the process exits: objects they made must never outlive them, so
// the libraries are never unloaded (the list is never destroyed, not even at exit).
std::vector<std::unique_ptr<boost::dll::shared_library>>& LoadedLibraries() {
  static auto* libraries = new std::vector<std::unique_ptr<boost::dll::shared_library>>();
  return *libraries;
}

std::string ExpectedSymbol() { return absl::StrCat(TITAN_PLUGIN_SYMBOL_PREFIX, TITAN_ABI_VERSION); }

bool IsValidName(absl::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-';
  });
}

// "the optimizer plugin 'lion'" for titan_optimizer_lion.so, as the file's name reads.
std::string NameInFileName(absl::string_view file_name) {
  absl::string_view stem = absl::StripSuffix(absl::StripPrefix(file_name, "titan_"), ".so");
  std::pair<absl::string_view, absl::string_view> kind_name = absl::StrSplit(stem, '_');
  if (kind_name.second.empty()) return absl::StrCat("'", stem, "'");
  return absl::StrCat("the ", kind_name.first, " plugin '", kind_name.second, "'");
}

}  // namespace

std::string PluginInfo::Describe() const {
  return absl::StrCat(descriptor->kind, " plugin '", descriptor->name, "' (", location(), ")");
}

namespace {

// Runs `call`; an exception escaping it becomes an error naming the plugin `who()` describes.
absl::Status Guarded(absl::FunctionRef<std::string()> who, absl::string_view what,
                     absl::FunctionRef<absl::Status()> call) {
  std::string escaped;
  try {
    return call();
  } catch (const std::exception& e) {
    escaped = absl::StrCat("a C++ exception: ", e.what());
  } catch (...) {
    escaped = "a C++ exception of an unknown type";
  }
  return absl::InternalError(absl::StrCat(who(), ": ", what, " threw ", escaped,
                                          " (a plugin must return an error status instead)"));
}

// Every instance Instantiate made, by the address of the whole object (a plugin's roles are
// parts of it), so that a call into it can name its plugin. Never destroyed, as the libraries.
// Each plugin's PluginInfo is kept once, and an instance costs one slot of a flat table: making
// and destroying instances (as validating a recipe does) then allocates nothing that stays, which
// keeps libFuzzer's leak check, run after any input that leaves memory allocated, quiet.
struct Instances {
  std::mutex mutex;
  absl::flat_hash_map<const PluginDescriptor*, std::unique_ptr<const PluginInfo>> plugins;
  absl::flat_hash_map<const void*, const PluginInfo*> made;  // guarded by mutex
};
Instances& MadeInstances() {
  static auto* instances = new Instances();
  return *instances;
}

}  // namespace

absl::Status CallPlugin(const PluginInfo& info, absl::string_view what,
                        absl::FunctionRef<absl::Status()> call) {
  return Guarded([&] { return info.Describe(); }, what, call);
}

std::string DescribePluginAt(const void* whole_object) {
  Instances& instances = MadeInstances();
  std::lock_guard<std::mutex> lock(instances.mutex);
  auto found = instances.made.find(whole_object);
  return found == instances.made.end() ? "a plugin" : found->second->Describe();
}

absl::Status CallPluginAt(const void* whole_object, absl::string_view what,
                          absl::FunctionRef<absl::Status()> call) {
  return Guarded([&] { return DescribePluginAt(whole_object); }, what, call);
}

absl::StatusOr<std::unique_ptr<Plugin>> Instantiate(const PluginInfo& info) {
  std::unique_ptr<Plugin> plugin;
  TITAN_RETURN_IF_ERROR(CallPlugin(info, "its factory", [&] {
    plugin.reset(info.descriptor->create());
    return absl::OkStatus();
  }));
  if (plugin == nullptr) {
    return absl::InternalError(
        absl::StrCat(info.Describe(), ": its factory returned null instead of an instance"));
  }
  Instances& instances = MadeInstances();
  std::lock_guard<std::mutex> lock(instances.mutex);
  std::unique_ptr<const PluginInfo>& kept = instances.plugins[info.descriptor];
  if (kept == nullptr) kept = std::make_unique<const PluginInfo>(info);  // one library, one path
  instances.made.insert_or_assign(dynamic_cast<const void*>(plugin.get()), kept.get());
  return plugin;
}

absl::StatusOr<std::vector<ConfigKey>> DeclaredKeys(const PluginInfo& info, const Plugin& plugin) {
  std::vector<ConfigKey> keys;
  TITAN_RETURN_IF_ERROR(CallPlugin(info, "ConfigKeys", [&] {
    keys = plugin.ConfigKeys();
    return absl::OkStatus();
  }));
  return keys;
}

absl::StatusOr<uint32_t> ReadPluginAbi(const fs::path& file) {
  absl::StatusOr<std::vector<std::string>> symbols = SymbolsInSection(file, TITAN_PLUGIN_SECTION);
  if (!symbols.ok()) {
    absl::string_view why =
        absl::StripPrefix(symbols.status().message(), absl::StrCat(file.string(), ": "));
    return absl::InvalidArgumentError(
        absl::StrCat(file.string(), ": not a titan plugin: not a shared library (", why, ")"));
  }
  for (const std::string& symbol : *symbols) {
    if (!absl::StartsWith(symbol, TITAN_PLUGIN_SYMBOL_PREFIX)) continue;
    uint32_t abi = 0;
    absl::string_view number = absl::string_view(symbol).substr(strlen(TITAN_PLUGIN_SYMBOL_PREFIX));
    if (!absl::SimpleAtoi(number, &abi)) continue;
    if (abi != TITAN_ABI_VERSION) {
      // A newer plugin needs a newer titan; an older one only a rebuild against this SDK.
      std::string remedy =
          abi > TITAN_ABI_VERSION
              ? absl::StrCat(
                    "the plugin is newer than this titan: install a titan whose plugin ABI is ",
                    abi, ", or rebuild the plugin against this titan's SDK")
              : "rebuild the plugin against the installed titan SDK";
      return absl::FailedPreconditionError(
          absl::StrCat(file.string(), ": plugin built for titan plugin ABI ", abi,
                       ", but this titan uses ABI ", TITAN_ABI_VERSION, " (titan ", TITAN_VERSION,
                       "); ", remedy, " (find_package(TitanSDK))"));
    }
    return abi;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      file.string(), ": not a titan plugin: no entry point (expected the symbol ", ExpectedSymbol(),
      " in section '", TITAN_PLUGIN_SECTION,
      "'; a plugin exports it with TITAN_PLUGIN(...) and is built with titan_add_plugin())"));
}

absl::StatusOr<std::vector<fs::path>> PluginSearchDirs(const std::vector<std::string>& flag_dirs,
                                                       absl::string_view env_path,
                                                       const fs::path& executable) {
  std::vector<fs::path> dirs;
  auto add = [&dirs](const fs::path& dir) {
    std::error_code error;
    fs::path canonical = fs::canonical(dir, error);
    if (error) return false;
    if (std::find(dirs.begin(), dirs.end(), canonical) == dirs.end()) dirs.push_back(canonical);
    return true;
  };
  for (const std::string& dir : flag_dirs) {
    if (!fs::is_directory(dir)) {
      return absl::NotFoundError(absl::StrCat("--plugin-dir ", dir, ": no such directory"));
    }
    add(dir);
  }
  for (const std::string& dir :
       std::vector<std::string>(absl::StrSplit(env_path, ':', absl::SkipEmpty()))) {
    if (!fs::is_directory(dir)) {
      return absl::NotFoundError(
          absl::StrCat("TITAN_PLUGIN_PATH entry ", dir, ": no such directory"));
    }
    add(dir);
  }
  // The build tree mirrors the install layout, so one relative path serves both.
  add(executable.parent_path() / TITAN_PLUGIN_DIR_FROM_BINDIR);
  return dirs;
}

absl::StatusOr<std::unique_ptr<PluginRegistry>> PluginRegistry::Discover(
    const std::vector<fs::path>& dirs) {
  auto registry = std::make_unique<PluginRegistry>();
  std::vector<std::string> problems;
  for (const PluginDescriptor* descriptor : BuiltinPlugins()) {
    absl::Status status = registry->Add(PluginInfo{descriptor, {}});
    if (!status.ok()) problems.push_back(std::string(status.message()));
  }
  for (const fs::path& dir : dirs) {
    std::vector<fs::path> files;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(dir, error)) {
      std::string file_name = entry.path().filename().string();
      if (absl::StartsWith(file_name, "titan_") && absl::EndsWith(file_name, ".so")) {
        files.push_back(entry.path());
      }
    }
    if (error) problems.push_back(absl::StrCat(dir.string(), ": ", error.message()));
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      absl::Status status = registry->LoadFile(file);
      if (status.ok()) continue;
      // A duplicate makes the choice of plugin ambiguous; any other fault concerns this file
      // alone, and the other plugins stay usable.
      if (absl::IsAlreadyExists(status)) {
        problems.push_back(std::string(status.message()));
      } else {
        registry->rejected_.push_back({file, std::string(status.message())});
      }
    }
  }
  if (!problems.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("plugin discovery failed:\n  ", absl::StrJoin(problems, "\n  ")));
  }
  return registry;
}

absl::Status PluginRegistry::LoadFile(const fs::path& file) {
  TITAN_RETURN_IF_ERROR(ReadPluginAbi(file).status());
  auto library = std::make_unique<boost::dll::shared_library>();
  const PluginDescriptor* descriptor = nullptr;
  try {
    library->load(boost::dll::fs::path(file.string()),
                  boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    descriptor = library->get<const PluginDescriptor*>(ExpectedSymbol());
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat(file.string(), ": cannot load plugin: ", e.what()));
  }
  LoadedLibraries().push_back(std::move(library));
  return Add(PluginInfo{descriptor, file});
}

absl::Status PluginRegistry::Add(PluginInfo info) {
  const PluginDescriptor& d = *info.descriptor;
  if (d.abi_version != TITAN_ABI_VERSION || d.kind == nullptr || d.name == nullptr ||
      d.version == nullptr || d.summary == nullptr || d.create == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(info.location(), ": malformed plugin descriptor"));
  }
  if (d.kernel_table != kKernelTableFingerprint) {
    // Same ABI number, another kernel table: an SDK whose titan/compute_kernels.inc was edited
    // without a new ABI number. Its kernel calls would land on the wrong entries.
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: plugin built against another compute kernel table (fingerprint %u, this titan's "
        "is %u, both at plugin ABI %d); rebuild the plugin against the installed titan SDK "
        "(find_package(TitanSDK))",
        info.location(), d.kernel_table, kKernelTableFingerprint, TITAN_ABI_VERSION));
  }
  if (std::find(std::begin(kKinds), std::end(kKinds), d.kind) == std::end(kKinds)) {
    return absl::FailedPreconditionError(absl::StrCat(info.location(), ": unknown plugin kind '",
                                                      d.kind, "'; kinds are ",
                                                      absl::StrJoin(kKinds, ", ")));
  }
  if (!IsValidName(d.name)) {
    return absl::FailedPreconditionError(absl::StrCat(info.location(), ": plugin name '", d.name,
                                                      "' must be lowercase letters, digits, '-'"));
  }
  if (const std::string file_name = absl::StrCat("titan_", d.kind, "_", d.name, ".so");
      !info.path.empty() && info.path.filename() != file_name) {
    // A recipe names a plugin by the name its file carries (the SDK's promise): a file that
    // holds another plugin would be chosen for one name and run as another.
    return absl::FailedPreconditionError(absl::StrCat(
        info.location(), ": the file's name says ", NameInFileName(info.path.filename().string()),
        ", but it holds the ", d.kind, " plugin '", d.name,
        "'; a plugin file is named titan_<kind>_<name>.so: rename it ", file_name));
  }
  for (const PluginInfo& other : plugins_) {
    if (absl::string_view(other.descriptor->kind) == d.kind &&
        absl::string_view(other.descriptor->name) == d.name) {
      return absl::AlreadyExistsError(absl::StrCat(
          "two ", d.kind, " plugins are named '", d.name, "': ", other.location(), " and ",
          info.location(), "; remove one or leave its directory off the plugin path"));
    }
  }
  plugins_.push_back(std::move(info));
  return absl::OkStatus();
}

namespace {

// Plugin names compare ignoring case, and '_' matches '-': library names allow only '-', while
// TorchTitan's recipe names ("rowwise_with_gw_hp") use '_'.
bool SamePluginName(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto fold = [](char c) { return c == '_' ? '-' : absl::ascii_tolower(c); };
           return fold(x) == fold(y);
         });
}

}  // namespace

absl::StatusOr<const PluginInfo*> PluginRegistry::Find(absl::string_view kind,
                                                       absl::string_view name) const {
  std::vector<std::string> available;
  for (const PluginInfo& info : plugins_) {
    if (info.descriptor->kind != kind) continue;
    if (SamePluginName(info.descriptor->name, name)) return &info;
    available.push_back(info.descriptor->name);
  }
  const std::string file_name = absl::StrCat("titan_", kind, "_", name, ".so");
  for (const RejectedPlugin& rejected : rejected_) {
    if (SamePluginName(rejected.path.filename().string(), file_name)) {
      return absl::FailedPreconditionError(
          absl::StrCat("the ", kind, " plugin '", name, "' cannot be used: ", rejected.reason));
    }
  }
  std::sort(available.begin(), available.end());
  return absl::NotFoundError(absl::StrCat(
      "no ", kind, " plugin named '", name, "'; available ", kind, " plugins: ",
      available.empty() ? "(none)" : absl::StrJoin(available, ", "), DidYouMean(name, available)));
}

}  // namespace titan
