// What a logged step reports: one compact console line, one JSON object per line in
// <job.dump_folder>/metrics.jsonl, and a progress bar with ETA when stderr is a terminal.
#ifndef TITAN_CORE_TRAIN_METRICS_H_
#define TITAN_CORE_TRAIN_METRICS_H_

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/model/config.h"
#include "core/runtime/tensorboard.h"
#include "core/train/peak_flops.h"
#include "titan/device.h"
#include "titan/status.h"

namespace titan {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0, grad_norm = 0, lr = 0;
  double tps = 0;      // tokens per second, this rank's share (see RankThroughput)
  double tflops = 0;   // achieved model TFLOP/s, this rank
  double mfu = 0;      // percent of the peak; above 100 the peak is wrong and it shows as n/a
  double mem_gib = 0;  // peak memory: the host's resident peak, or the device's allocated peak
  // On an accelerator: the most memory held from the device (allocated plus cached).
  bool device_memory = false;
  double mem_reserved_gib = 0;
  double data_s = 0;  // time spent loading the step's batches
  // Pipeline parallelism: the idle fraction of the pp ranks' schedule time, measured over the
  // logged steps, and the schedule's theoretical one (F=1, B=2).
  bool pipeline = false;
  double bubble = 0, bubble_theory = 0;
  // A mixture of experts' (empty without): StepResult's expert_tokens and expert_imbalance.
  std::vector<int64_t> expert_tokens;
  double expert_imbalance = 0;
  std::optional<double> aux_loss;  // StepResult's
  // Tensor parallelism under profiling.enable_profiling: per step, this rank's sequence-parallel
  // communication hidden under the matmuls by async tp and exposed, summed over the layers, in
  // seconds.
  bool tp_overlap = false;
  double tp_hidden_s = 0, tp_exposed_s = 0;
};

class MetricsLog {
 public:
  // Opens <dump_folder>/metrics.jsonl. A fresh run (`resumed_step` 0) starts it empty; a run
  // resumed after `resumed_step` keeps the history up to that step and drops the rows past it,
  // which it logs again; lines that are no row (a damaged file) are left out with a warning
  // naming their line numbers, and when the row of `resumed_step` itself is lost,
  // `resumed_row` (the checkpoint's copy of it, if any) takes its place. With `tensorboard` each
  // row also goes there as scalars of the values the row holds; `jsonl` false writes only those
  // (another rank's, metrics.save_for_all_ranks).
  static absl::StatusOr<MetricsLog> Open(const std::string& dump_folder, PeakFlops peak,
                                         int64_t resumed_step = 0,
                                         std::unique_ptr<TensorBoardWriter> tensorboard = nullptr,
                                         bool jsonl = true, const std::string& resumed_row = "");
  void Log(const StepMetrics& m);
  // The training row logged for `step` (one line of JSON, no newline), which a checkpoint of
  // that step keeps; empty when the last row logged is another step's.
  std::string TrainingRow(int64_t step) const {
    return last_row_step_ == step ? last_row_ : std::string();
  }
  void LogEval(int64_t step, double loss);
  // Redraws the progress bar (terminal only).
  void Progress(int64_t step, int64_t steps, double elapsed_s);
  const std::string& path() const { return path_; }
  const PeakFlops& peak() const { return peak_; }

 private:
  void ClearBar();
  // Writes one row, {"key": value, ...}, to metrics.jsonl and the same values to TensorBoard;
  // returns the row.
  std::string WriteRow(int64_t step,
                       const std::vector<std::pair<std::string, std::string>>& fields);
  std::string path_;
  bool jsonl_ = true;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::ofstream out_;
  PeakFlops peak_;
  bool terminal_ = false;
  bool bar_shown_ = false;
  bool warned_mfu_ = false;
  bool warned_tensorboard_ = false;
  std::string last_row_;
  int64_t last_row_step_ = -1;
};

// What a resumed run keeps of a metrics.jsonl text.
struct MetricsHistory {
  std::string kept;                    // the rows up to and including the step, in order
  int64_t past = 0;                    // rows past the step, left out (logged again)
  std::vector<int64_t> invalid_lines;  // 1-based numbers of lines that are no row, left out
  bool has_step_row = false;           // `kept` holds the training row (with a loss) of the step
};
MetricsHistory MetricsRowsUpTo(absl::string_view jsonl, int64_t step);

// "3, 7-9, 12": line numbers in increasing order, runs joined.
std::string LineRanges(const std::vector<int64_t>& lines);

// Tokens/s, TFLOP/s and MFU (percent of `peak_tflops`) of one rank that stepped through `tokens`
// tokens in `seconds`. The ranks of one data-parallel replica (tp, cp, pp) share its tokens, each
// doing its part of the work on them, so each counts tokens / `non_data_parallel` of them, as
// TorchTitan does.
struct Throughput {
  double tps = 0, tflops = 0, mfu = 0;
};
Throughput RankThroughput(int64_t tokens, double seconds, int non_data_parallel,
                          double flop_per_token, double peak_tflops);

// Peak resident memory of this program since it started (exec), GiB.
double PeakMemoryGib();
// Sets m.mem_gib (and, on an accelerator, m.mem_reserved_gib) for the device the model is on.
void SetPeakMemory(DevicePlugin& device, StepMetrics& m);
// Training FLOPs per token: 6 per parameter outside the token embedding (TorchTitan's count; a
// table tied to the output projection counts, as that projection is a matmul),
// plus 6 * n_layers * dim * seq_len for attention's scores and weighted sums over the causal half
// (TorchTitan counts 12, as if unmasked, which puts long-sequence MFU above what is computed).
double FlopPerToken(const LlamaConfig& config, int64_t seq_len);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_METRICS_H_
