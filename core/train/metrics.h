// What a logged step reports: one compact console line, one JSON object per line in
// <job.dump_folder>/metrics.jsonl, and a progress bar with ETA when stderr is a terminal.
#ifndef TITAN_CORE_TRAIN_METRICS_H_
#define TITAN_CORE_TRAIN_METRICS_H_

#include <cstdint>
#include <fstream>
#include <string>

#include "core/model/config.h"
#include "titan/status.h"

namespace titan {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0, grad_norm = 0, lr = 0;
  double tps = 0;      // tokens per second, this rank
  double tflops = 0;   // achieved model TFLOP/s, this rank
  double mfu = 0;      // percent of the peak
  double mem_gib = 0;  // peak resident memory
  double data_s = 0;   // time spent loading the step's batches
};

class MetricsLog {
 public:
  static absl::StatusOr<MetricsLog> Open(const std::string& dump_folder);
  void Log(const StepMetrics& m);
  void LogEval(int64_t step, double loss);
  // Redraws the progress bar (terminal only).
  void Progress(int64_t step, int64_t steps, double elapsed_s);
  const std::string& path() const { return path_; }

 private:
  void ClearBar();
  std::string path_;
  std::ofstream out_;
  bool terminal_ = false;
  bool bar_shown_ = false;
};

// Peak resident memory of this program since it started (exec), GiB.
double PeakMemoryGib();
// A quick f32 matmul probe of this machine's reachable TFLOP/s (best of a few n x n x n
// sgemms), for MFU without a given peak.
double MeasurePeakTflops(int n = 1024);
// Training FLOPs per token: 6 per parameter outside the token embedding (TorchTitan's count; a
// table tied to the output projection counts, as that projection is a matmul),
// plus 6 * n_layers * dim * seq_len for attention's scores and weighted sums over the causal half
// (TorchTitan counts 12, as if unmasked, which puts long-sequence MFU above what is computed).
double FlopPerToken(const LlamaConfig& config, int64_t seq_len);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_METRICS_H_
