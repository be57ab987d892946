// The text the proof ends with: each part's status, the throughput table, the verdict.
#ifndef TITAN_TOOLS_GPU_PROOF_SUMMARY_H_
#define TITAN_TOOLS_GPU_PROOF_SUMMARY_H_

#include <string>

#include "tools/gpu_proof/report.h"

namespace titan::gpu_proof {

inline constexpr char kNoDeviceLine[] =
    "gpu-check: no CUDA device — nothing on a GPU was run (verdict: no device)";

// The summary of a finished report (its "device", "parts", "verdict", "report" and "log").
std::string FormatSummary(const Json& report);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_SUMMARY_H_
