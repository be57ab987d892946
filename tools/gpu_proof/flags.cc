#include "tools/gpu_proof/flags.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace titan::gpu_proof {

absl::StatusOr<Flags> ParseFlags(const std::vector<std::string>& args) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string arg = args[i];
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    if (name == "--make-reference" || name == "--help") {
      if (equals != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(name, " takes no value, found '", arg, "'"));
      }
      if (name == "--help") flags.help = true;
      if (name == "--make-reference") flags.make_reference = true;
      continue;
    }
    if (name != "--bundle" && name != "--report" && name != "--deadline-s" && name != "--work") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown argument '", arg, "'; expected --bundle, --report, --deadline-s, ",
                       "--work, --make-reference or --help"));
    }
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    }
    if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(name, " needs a value"));
    if (name == "--bundle") flags.bundle = value;
    if (name == "--report") flags.report = value;
    if (name == "--work") flags.work = value;
    if (name == "--deadline-s" &&
        (!absl::SimpleAtod(value, &flags.deadline_s) || !(flags.deadline_s > 0))) {
      return absl::InvalidArgumentError(
          absl::StrCat("--deadline-s: expected a positive number of seconds, found '", value, "'"));
    }
  }
  if (!flags.help && flags.bundle.empty()) {
    return absl::InvalidArgumentError("--bundle DIR is required: the unpacked bundle's folder");
  }
  return flags;
}

std::vector<std::string> MissingFromBundle(const std::string& dir, bool make_reference) {
  std::vector<std::string> needed = {"recipes/llama3_debug.toml", "data/fortunes"};
  if (!make_reference) needed.push_back("reference/cpu_f32/metrics.jsonl");
  std::vector<std::string> missing;
  const std::string titan_run = dir + "/bin/titan-run";
  if (access(titan_run.c_str(), X_OK) != 0) missing.push_back("bin/titan-run");
  for (const std::string& path : needed) {
    std::error_code error;
    if (!std::filesystem::exists(dir + "/" + path, error)) missing.push_back(path);
  }
  return missing;
}

}  // namespace titan::gpu_proof
