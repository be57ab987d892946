#include "core/cli/options.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/runtime/closest_name.h"

namespace titan {

const char kUsage[] = R"(usage: titan-run [--recipe FILE] [options] [--section.key=value ...]

Trains a Llama 3 model as a TOML recipe describes.

  --recipe FILE          the recipe to run (see recipes/)
  --section.key=value    override one recipe key, e.g. --training.steps=20
  --print-recipe         print the effective recipe (every key, with defaults) as TOML
  --validate             check all a run checks before training (recipe, plugins, mesh,
                         model shapes, sizes, data, starting checkpoint), then exit
  --list-plugins         list the plugins found: kind, name, version, ABI, path, summary
  --recipe-reference     print every recipe section and key (with the plugins' keys) as Markdown
  --plugin-dir DIR       look for plugins in DIR first (repeatable)
  --log-level LEVEL      trace, debug, info (default), warn, error, critical, off
  --version              print titan's version and plugin ABI
  --help                 this text

Plugins are searched in --plugin-dir, then TITAN_PLUGIN_PATH (':'-separated), then the
plugin folder of the build tree or install prefix titan-run runs from.

Environment:
  TITAN_PLUGIN_PATH      plugin folders searched after --plugin-dir, ':'-separated
  OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK
                         set by mpirun: the number of ranks, this rank, its rank on its machine
  SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID
                         set by srun in a job step (SLURM_STEP_ID): the same; the local rank
                         picks the GPU (job.device = "cuda")
)";

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  Options options;
  const std::vector<std::string> kFlags = {"--recipe",           "--print-recipe", "--validate",
                                           "--list-plugins",     "--plugin-dir",   "--log-level",
                                           "--recipe-reference", "--version",      "--help"};
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    std::optional<std::string> inline_value;
    if (absl::StartsWith(arg, "--") && arg.find('=') != std::string::npos &&
        arg.find('.') > arg.find('=')) {
      inline_value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
    }
    auto value = [&](const char* flag) -> absl::StatusOr<std::string> {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size())
        return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
      return args[++i];
    };
    if (arg == "--recipe") {
      TITAN_ASSIGN_OR_RETURN(options.recipe, value("--recipe"));
    } else if (arg == "--plugin-dir") {
      TITAN_ASSIGN_OR_RETURN(std::string dir, value("--plugin-dir"));
      options.plugin_dirs.push_back(dir);
    } else if (arg == "--log-level") {
      TITAN_ASSIGN_OR_RETURN(options.log_level, value("--log-level"));
    } else if (arg == "--print-recipe" && !inline_value) {
      options.print_recipe = true;
    } else if (arg == "--validate" && !inline_value) {
      options.validate = true;
    } else if (arg == "--recipe-reference" && !inline_value) {
      options.recipe_reference = true;
    } else if (arg == "--list-plugins" && !inline_value) {
      options.list_plugins = true;
    } else if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else if (arg == "--version" && !inline_value) {
      options.version = true;
    } else if (absl::StartsWith(arg, "--") && arg.find('.') != std::string::npos) {
      if (args[i].find('=') == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(args[i], ": a recipe override is --section.key=value"));
      }
      options.overrides.push_back(args[i].substr(2));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", args[i], "'",
                                                     DidYouMean(arg, kFlags),
                                                     " (titan-run --help lists them)"));
    }
  }
  return options;
}

}  // namespace titan
