// A part's outcome and the proof's verdict over all of them, with the exit code it gives.
#ifndef TITAN_TOOLS_GPU_PROOF_VERDICT_H_
#define TITAN_TOOLS_GPU_PROOF_VERDICT_H_

#include <string>
#include <vector>

#include "tools/gpu_proof/report.h"

namespace titan::gpu_proof {

enum class PartStatus { kPass, kFail, kTimedOut, kNotRun };

// The reasons a part is not run.
inline constexpr char kNoDevice[] = "no CUDA device";
inline constexpr char kNoLauncher[] = "no launcher";
inline constexpr char kOneDevice[] = "one CUDA device: the part needs two or more";
inline constexpr char kOverallDeadline[] = "overall deadline";
inline constexpr char kPending[] = "not reached yet";

struct PartResult {
  std::string name;
  PartStatus status = PartStatus::kNotRun;
  std::string reason;  // empty when it passed
  double seconds = 0;
  double budget_s = 0;
  Json details = Json::object();
};

// "pass", "fail", "timed out", "not run".
std::string StatusName(PartStatus status);

// {status, reason (unless passed), seconds, budget_s, details}.
Json ToJson(const PartResult& part);

enum ExitCode { kExitPass = 0, kExitFail = 1, kExitUsage = 2, kExitNoDevice = 3 };

struct Verdict {
  std::string name;  // "pass", "fail", "no device"
  int exit_code = kExitFail;
  std::vector<std::string> notes;  // what the verdict allowed or blamed, one line each
};

// "fail" when a part failed, timed out, or was not run for want of time (or for a reason not
// allowed); else "no device" without a CUDA device; else "pass". Parts without a launcher are
// allowed and listed. A broken bundle fails even where there is no device.
Verdict DecideVerdict(bool have_device, const std::vector<PartResult>& parts);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_VERDICT_H_
