// The throughput table: the debug model and the 1B flavor in bf16, each also with its linears
// in Float8 (tensorwise), with tokens/s, TFLOP/s, MFU against the GPU's dense bf16 peak (the
// datasheet's) and against the bf16 GEMM ceiling titan-run measured on it, and memory, from the
// last logged window of each run (after the first steps' warm-up); then where a 1B bf16 step goes
// by kernel class (kernel_profile.h), from a profiled run of 3 steps.
#ifndef TITAN_TOOLS_GPU_PROOF_THROUGHPUT_H_
#define TITAN_TOOLS_GPU_PROOF_THROUGHPUT_H_

#include <optional>
#include <string>
#include <vector>

#include "tools/gpu_proof/losses.h"
#include "tools/gpu_proof/report.h"
#include "tools/gpu_proof/titan_command.h"

namespace titan::gpu_proof {

// The dense bf16 peak (TFLOP/s, no sparsity) of a device by its name; none for names not known.
std::optional<double> PeakTflops(const std::string& device_name);

// The GEMM ceiling titan-run measured on the device for MFU (its "[metrics] peak X TFLOP/s per
// rank, for MFU: measured" line), from the run's output; none when it logged another peak.
std::optional<double> MeasuredCeiling(const std::string& output);

struct ThroughputRun {
  std::string flavor;     // "debugmodel", "1B", "8B, 8 layers" (model.n_layers = 8)
  std::string precision;  // "bf16", "float8 tensorwise", "float8 rowwise" (bf16 and Float8)
  std::string folder;     // the dump folder's name
  double weight = 1;      // its share of the part's time, against the others'
  std::vector<std::string> overrides;
};

// The runs, on cuda: the debug model in bf16 and Float8 tensorwise, the 1B flavor and 8B's width
// at 8 layers each in bf16 and Float8 tensorwise and rowwise. No --metrics.peak_tflops: each run
// measures the device's bf16 GEMM ceiling, and the datasheet's MFU is computed here.
std::vector<ThroughputRun> ThroughputRuns(const Bundle& bundle);

// A table row: {flavor, precision, status, tokens_per_s, tflops, mfu_percent (against the
// datasheet's `peak`), ceiling_tflops, mfu_ceiling_percent (against the measured `ceiling`),
// mem_gib, step}; figures from the last training row, null when the run logged none or the
// denominator is unknown.
Json ThroughputRow(const ThroughputRun& run, const std::string& status, const Metrics& metrics,
                   std::optional<double> peak, std::optional<double> ceiling);

// The 1B bf16 run for the kernel profile: 3 steps, the third profiled.
ThroughputRun ProfiledRun(const ThroughputRun& run);

// The rows as an aligned text table; "n/a" for missing figures.
std::string FormatThroughputTable(const Json& rows);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_THROUGHPUT_H_
