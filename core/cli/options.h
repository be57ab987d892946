// titan-run's command line.
#ifndef TITAN_CORE_CLI_OPTIONS_H_
#define TITAN_CORE_CLI_OPTIONS_H_

#include <string>
#include <vector>

#include "titan/status.h"

namespace titan {

struct Options {
  std::string recipe;
  std::vector<std::string> overrides;  // "section.key=value"
  std::vector<std::string> plugin_dirs;
  std::string log_level = "info";
  bool print_recipe = false;
  bool list_plugins = false;
  bool validate = false;
  bool recipe_reference = false;
  bool help = false;
  bool version = false;
};

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args);

extern const char kUsage[];

}  // namespace titan

#endif  // TITAN_CORE_CLI_OPTIONS_H_
