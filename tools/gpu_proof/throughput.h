// The throughput table: the debug model and the 1B flavor in bf16, each also with its linears
// in Float8 (tensorwise), with tokens/s, TFLOP/s, MFU against the GPU's dense bf16 peak, and
// memory, from the last logged window of each run (after the first steps' warm-up).
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

struct ThroughputRun {
  std::string flavor;     // "debugmodel", "1B"
  std::string precision;  // "bf16", "bf16 + float8"
  std::string folder;     // the dump folder's name
  double weight = 1;      // its share of the part's time, against the others'
  std::vector<std::string> overrides;
};

// The four runs, on cuda, with --metrics.peak_tflops when the peak is known.
std::vector<ThroughputRun> ThroughputRuns(const Bundle& bundle, std::optional<double> peak);

// A table row: {flavor, precision, status, tokens_per_s, tflops, mfu_percent, mem_gib, step};
// figures from the last training row, null when the run logged none. MFU only with a peak.
Json ThroughputRow(const ThroughputRun& run, const std::string& status, const Metrics& metrics,
                   bool peak_known);

// The rows as an aligned text table; "n/a" for missing figures.
std::string FormatThroughputTable(const Json& rows);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_THROUGHPUT_H_
