// What titan-run's output and files say: the plugins --list-plugins found, whether a run loaded
// a checkpoint, whether two runs left the same parameters.
#ifndef TITAN_TOOLS_GPU_PROOF_TITAN_OUTPUT_H_
#define TITAN_TOOLS_GPU_PROOF_TITAN_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace titan::gpu_proof {

// The bundle's plugin files: <plugin_dir>/titan_*.so, each named as titan-run lists it (the
// folder's real path and the file's name), sorted.
std::vector<std::string> BundlePluginPaths(const std::string& plugin_dir);

// What is wrong with a --list-plugins `listing` that should show each of `expected` (paths):
// one line per plugin not listed and per file titan-run skipped. Empty when all is well.
std::vector<std::string> PluginListingProblems(const std::string& listing,
                                               const std::vector<std::string>& expected);

// Whether the run's output says it loaded all of the checkpoint of `step`:
// "[checkpoint] loaded .../step-<N> (step <N>)".
bool SaysLoadedStep(const std::string& output, int64_t step);

// Whether the two files hold the same bytes; an error when either cannot be read.
absl::StatusOr<bool> SameBytes(const std::string& a, const std::string& b);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_TITAN_OUTPUT_H_
