// What every part works with: the bundle, its work folder, the log, the children's environment
// and the end of its time; and running titan-run for a part, with the outcome of a run that
// went wrong.
#ifndef TITAN_TOOLS_GPU_PROOF_CONTEXT_H_
#define TITAN_TOOLS_GPU_PROOF_CONTEXT_H_

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/gpu_proof/losses.h"
#include "tools/gpu_proof/process.h"
#include "tools/gpu_proof/titan_command.h"
#include "tools/gpu_proof/verdict.h"

namespace titan::gpu_proof {

using Clock = std::chrono::steady_clock;

struct Context {
  Bundle bundle;
  std::string work;                                      // a folder of the proof's own
  std::string log;                                       // every command and its output
  std::vector<std::pair<std::string, std::string>> env;  // set for every child
  std::string device_name;                               // the CUDA device's, "" without one
  int device_count = 0;                                  // the CUDA devices the driver shows
  Clock::time_point part_end = Clock::now();

  double LeftS() const;  // seconds until part_end
  // `argv` with the children's environment, run for at most `limit_s` (default: LeftS()).
  RunResult Run(std::vector<std::string> argv, double limit_s = -1,
                std::vector<std::pair<std::string, std::string>> extra_env = {}) const;
};

struct PartOutcome {
  PartStatus status = PartStatus::kFail;
  std::string reason;
  Json details = Json::object();
};

struct TitanRun {
  std::string what;    // "the cuda f32 run", for reasons
  std::string folder;  // its dump folder
  RunResult run;
  absl::StatusOr<Metrics> metrics = absl::UnknownError("not run");
  bool ok() const { return run.ok() && metrics.ok(); }
};

// The debug recipe with `overrides` in the dump folder <work>/<name> (emptied first when
// `fresh`), its metrics read back; `extra_env` is set for it beside the children's environment.
TitanRun RunDebugRecipe(const Context& context, const std::string& what, const std::string& name,
                        const std::vector<std::string>& overrides, int ranks = 1,
                        double limit_s = -1, bool fresh = true,
                        std::vector<std::pair<std::string, std::string>> extra_env = {});

// What a part found: its problems (none: it passed), whether its time ran out, its details.
struct Findings {
  std::vector<std::string> problems;
  bool timed_out = false;
  Json details = Json::object();

  void Problem(const std::string& problem) { problems.push_back(problem); }
  // A run that did not succeed: how it ended, or why its metrics could not be read, is a
  // problem; details[key] gets its folder and its output's tail.
  void RunWentWrong(const std::string& key, const TitanRun& run);
  // Passes without problems; else "timed out" when a run's time ran out, or "fail"; the reason
  // is the problems, joined.
  PartOutcome Outcome() const;
};

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_CONTEXT_H_
