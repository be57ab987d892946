// Where a GPU step goes, by kernel class: the throughput part's profiled 1B run writes a trace
// (profiling.enable_profiling) whose `kernel` spans are each kernel's device time (titan-run
// waits for the device around every kernel of a profiled step); this sums them by class.
#ifndef TITAN_TOOLS_GPU_PROOF_KERNEL_PROFILE_H_
#define TITAN_TOOLS_GPU_PROOF_KERNEL_PROFILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "tools/gpu_proof/report.h"

namespace titan::gpu_proof {

// The class of a compute kernel by its name: "GEMMs", "attention", "Float8 casts", "norms",
// "RoPE", "SwiGLU", "embedding", "loss", "experts", "optimizer", "casts", "copies" or
// "elementwise".
std::string KernelClass(const std::string& kernel);

// From a trace's JSON text: {"step_ms", "kernels_ms", "classes": [{"class", "ms", "calls",
// "percent_of_step"}] by time, most first, "top_kernels": the 8 kernels of most time, each
// {"kernel", "ms", "calls"}}. An error when the text is no trace or holds no kernel span.
absl::StatusOr<Json> KernelProfile(const std::string& trace_json);

// The classes as an aligned text table, the step's and the kernels' sums first.
std::string FormatKernelProfile(const Json& profile);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_KERNEL_PROFILE_H_
