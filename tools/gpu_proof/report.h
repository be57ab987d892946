// The proof's JSON report, rewritten whole after every part: a reader (or a machine that loses
// its power mid-proof) sees the previous complete report or the new one, never half of one.
#ifndef TITAN_TOOLS_GPU_PROOF_REPORT_H_
#define TITAN_TOOLS_GPU_PROOF_REPORT_H_

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace titan::gpu_proof {

using Json = nlohmann::ordered_json;  // keys stay in the order they were added

// Writes `value` (indented) to a temporary file beside `path`, syncs it, and renames it over
// `path`; the folder is synced too, so the rename itself survives a crash.
absl::Status WriteJsonAtomically(const std::string& path, const Json& value);

// The log beside the report: "x/report.json" -> "x/report.log"; another suffix gets ".log" added.
std::string LogPathFor(const std::string& report_path);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_REPORT_H_
