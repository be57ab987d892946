#include "tools/gpu_proof/verdict.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace titan::gpu_proof {

std::string StatusName(PartStatus status) {
  switch (status) {
    case PartStatus::kPass:
      return "pass";
    case PartStatus::kFail:
      return "fail";
    case PartStatus::kTimedOut:
      return "timed out";
    case PartStatus::kNotRun:
      return "not run";
  }
  return "unknown";
}

Json ToJson(const PartResult& part) {
  Json entry = {{"status", StatusName(part.status)}};
  if (part.status != PartStatus::kPass) entry["reason"] = part.reason;
  entry["seconds"] = std::round(part.seconds * 10) / 10;
  entry["budget_s"] = std::round(part.budget_s * 10) / 10;
  entry["details"] = part.details;
  return entry;
}

Verdict DecideVerdict(bool have_device, const std::vector<PartResult>& parts) {
  Verdict verdict;
  bool failed = false;
  int passed = 0;
  for (const PartResult& part : parts) {
    if (part.status == PartStatus::kPass) {
      ++passed;
      continue;
    }
    // Without a device the GPU parts cannot run: that is the "no device" verdict's business; a
    // part needing two devices on a machine with one is skipped, as it says.
    const bool allowed = part.status == PartStatus::kNotRun &&
                         (part.reason == kNoLauncher || part.reason == kOneDevice ||
                          (!have_device && part.reason == kNoDevice));
    failed = failed || !allowed;
    verdict.notes.push_back(absl::StrCat(part.name, ": ", StatusName(part.status),
                                         part.reason.empty() ? "" : ": ", part.reason));
  }
  if (passed == 0) {
    failed = true;
    verdict.notes.push_back("no part passed");
  }
  if (failed) {
    verdict.name = "fail";
    verdict.exit_code = kExitFail;
  } else if (!have_device) {
    verdict.name = "no device";
    verdict.exit_code = kExitNoDevice;
  } else {
    verdict.name = "pass";
    verdict.exit_code = kExitPass;
  }
  return verdict;
}

}  // namespace titan::gpu_proof
