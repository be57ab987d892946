#include "tools/gpu_proof/context.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace titan::gpu_proof {

double Context::LeftS() const {
  return std::chrono::duration<double>(part_end - Clock::now()).count();
}

RunResult Context::Run(std::vector<std::string> argv, double limit_s,
                       std::vector<std::pair<std::string, std::string>> extra_env) const {
  Command command{std::move(argv), env, {}};
  command.set_env.insert(command.set_env.end(), extra_env.begin(), extra_env.end());
  // titan-run finds the bundle's plugins beside itself; a plugin path of the caller's would add
  // others. (The test binaries set theirs in `extra_env`, which wins.)
  command.unset_env = {"TITAN_PLUGIN_PATH"};
  return RunCommand(command, log, limit_s < 0 ? LeftS() : limit_s);
}

TitanRun RunDebugRecipe(const Context& context, const std::string& what, const std::string& name,
                        const std::vector<std::string>& overrides, int ranks, double limit_s,
                        bool fresh, std::vector<std::pair<std::string, std::string>> extra_env) {
  TitanRun result;
  result.what = what;
  result.folder = context.work + "/" + name;
  if (fresh) {
    std::error_code ignored;
    std::filesystem::remove_all(result.folder, ignored);
  }
  result.run = context.Run(DebugRecipeCommand(context.bundle, result.folder, overrides, ranks),
                           limit_s, std::move(extra_env));
  if (result.run.ok()) result.metrics = ReadMetrics(result.folder + "/metrics.jsonl");
  return result;
}

void Findings::RunWentWrong(const std::string& key, const TitanRun& run) {
  if (run.run.timed_out) {
    timed_out = true;
    Problem(absl::StrCat("timed out during ", run.what));
  } else if (!run.run.ok()) {
    Problem(absl::StrCat(run.what, " ended with ", run.run.Describe()));
  } else {
    Problem(absl::StrCat(run.what, ": ", run.metrics.status().message()));
  }
  details[key] = {
      {"run", run.what}, {"outcome", run.run.Describe()}, {"output", Tail(run.run.output)}};
  if (!run.folder.empty()) details[key]["folder"] = run.folder;
}

PartOutcome Findings::Outcome() const {
  PartOutcome outcome;
  outcome.status = problems.empty() ? PartStatus::kPass
                   : timed_out      ? PartStatus::kTimedOut
                                    : PartStatus::kFail;
  outcome.reason = absl::StrJoin(problems, "; ");
  outcome.details = details;
  return outcome;
}

}  // namespace titan::gpu_proof
