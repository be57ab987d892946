// titan-checkpoint: lists what a checkpoint folder holds and converts the model between
// checkpoint formats (dcp, safetensors, any checkpoint plugin). Documented in docs/checkpoints.md.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/runtime/closest_name.h"
#include "core/runtime/plugin_registry.h"
#include "tools/checkpoint/checkpoint_tool.h"

namespace titan {
namespace {

constexpr char kUsage[] =
    R"(usage: titan-checkpoint list FOLDER [--format=F]
       titan-checkpoint convert SRC DST --to=F [--from=F] [--dtype=bf16|f32|f16]
  list       the step, each tensor's name, shape, dtype and size, the totals, the metadata
  convert    the model of SRC (every model/ tensor) saved as DST in format --to
  --format=F, --from=F   the folder's format (dcp, safetensors, ...); default: detected
  --to=F                 the format to write
  --dtype=D              convert the tensors to bf16, f32 or f16; default: as stored
  --plugin-dir=DIR       look for plugins here first (repeatable)
  --help                 this text
Flags take their value after '=' or as the next argument.
)";

constexpr int kExitError = 1, kExitUsage = 2;

struct Flags {
  std::string command;
  std::vector<std::string> folders;
  std::string format, from, to;
  std::optional<DType> dtype;
  std::vector<std::string> plugin_dirs;
  bool help = false;
};

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  const std::vector<std::string> names = {"format", "from", "to", "dtype", "plugin-dir", "help"};
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      positional.push_back(arg);
      continue;
    }
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(2, equals == std::string::npos ? equals : equals - 2);
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, DidYouMean(name, names), "\n", kUsage));
    }
    if (name == "help") {
      flags.help = true;
      continue;
    }
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (i + 1 < argc) {
      value = argv[++i];
    }
    if (value.empty())
      return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
    if (name == "format") flags.format = value;
    if (name == "from") flags.from = value;
    if (name == "to") flags.to = value;
    if (name == "plugin-dir") flags.plugin_dirs.push_back(value);
    if (name == "dtype") {
      if (value == "bf16") {
        flags.dtype = DType::kBF16;
      } else if (value == "f32") {
        flags.dtype = DType::kF32;
      } else if (value == "f16") {
        flags.dtype = DType::kF16;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--dtype=", value, ": expected bf16, f32 or f16"));
      }
    }
  }
  if (flags.help) return flags;
  if (positional.empty()) return absl::InvalidArgumentError(absl::StrCat("no command\n", kUsage));
  flags.command = positional[0];
  flags.folders.assign(positional.begin() + 1, positional.end());
  const size_t wanted = flags.command == "list" ? 1 : flags.command == "convert" ? 2 : 0;
  if (wanted == 0) {
    return absl::InvalidArgumentError(absl::StrCat("unknown command '", flags.command, "'",
                                                   DidYouMean(flags.command, {"list", "convert"}),
                                                   "\n", kUsage));
  }
  if (flags.folders.size() != wanted) {
    return absl::InvalidArgumentError(absl::StrCat(flags.command, " takes ", wanted,
                                                   wanted == 1 ? " folder" : " folders", ", found ",
                                                   flags.folders.size(), "\n", kUsage));
  }
  if (flags.command == "list" && (!flags.from.empty() || !flags.to.empty() || flags.dtype)) {
    return absl::InvalidArgumentError("list takes --format, not --from, --to or --dtype");
  }
  if (flags.command == "convert" && (flags.to.empty() || !flags.format.empty())) {
    return absl::InvalidArgumentError("convert needs --to=FORMAT (and takes --from, not --format)");
  }
  return flags;
}

absl::Status Run(const Flags& flags) {
  const char* env = std::getenv("TITAN_PLUGIN_PATH");
  TITAN_ASSIGN_OR_RETURN(std::vector<std::filesystem::path> dirs,
                         PluginSearchDirs(flags.plugin_dirs, env ? env : "",
                                          std::filesystem::read_symlink("/proc/self/exe")));
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<PluginRegistry> registry, PluginRegistry::Discover(dirs));
  for (const RejectedPlugin& rejected : registry->rejected()) {
    std::fprintf(stderr, "%s: warning: skipping plugin file %s\n", "titan-checkpoint",
                 rejected.reason.c_str());
  }
  if (flags.command == "list") {
    const std::string& folder = flags.folders[0];
    std::string format = flags.format;
    if (format.empty()) {
      TITAN_ASSIGN_OR_RETURN(format, DetectFormat(*registry, folder));
    }
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointPlugin> plugin,
                           MakeCheckpointPlugin(*registry, format));
    TITAN_ASSIGN_OR_RETURN(CheckpointContents contents,
                           CallPluginOf(*plugin, "Read", [&] { return plugin->Read(folder); }));
    std::fputs(FormatListing(folder, format, contents).c_str(), stdout);
    return absl::OkStatus();
  }
  const ConvertOptions options{flags.from, flags.to, flags.dtype};
  TITAN_ASSIGN_OR_RETURN(ConvertReport report,
                         ConvertCheckpoint(*registry, flags.folders[0], flags.folders[1], options));
  std::printf("converted %ld tensors (%s) from %s %s to %s %s\n", report.tensors,
              HumanBytes(report.bytes).c_str(), report.from.c_str(), flags.folders[0].c_str(),
              flags.to.c_str(), flags.folders[1].c_str());
  if (report.skipped > 0) {
    std::printf(
        "left out %ld %s outside model/ (such as %s): a conversion carries the model only\n",
        report.skipped, report.skipped == 1 ? "tensor" : "tensors", report.skipped_example.c_str());
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  absl::StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "titan-checkpoint: %s\n", std::string(flags.status().message()).c_str());
    return kExitUsage;
  }
  if (flags->help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  absl::Status status = Run(*flags);
  if (!status.ok()) {
    std::fprintf(stderr, "titan-checkpoint: %s\n", std::string(status.message()).c_str());
    return kExitError;
  }
  return 0;
}

}  // namespace
}  // namespace titan

int main(int argc, char** argv) { return titan::Main(argc, argv); }
