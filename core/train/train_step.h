// One optimizer step of single-process training: the microbatches' gradients summed and averaged
// (global batch = local batch x accumulation steps), clipped by global norm, checked for NaN/Inf,
// then the optimizer's update with the scheduled lr. The optimizer state lives in an arena, one
// tensor per state slot, so a checkpoint saves and restores it (core/tensor/arena_file.h).
#ifndef TITAN_CORE_TRAIN_TRAIN_STEP_H_
#define TITAN_CORE_TRAIN_TRAIN_STEP_H_

#include <functional>
#include <memory>
#include <vector>

#include "core/model/llama.h"
#include "core/tensor/arena.h"
#include "titan/optimizer.h"

namespace titan {

struct StepResult {
  double loss = 0;       // mean over the microbatches
  double grad_norm = 0;  // global L2 norm of the averaged gradients, before clipping
};

// Fills tokens and targets, each [batch, seq_len], with the next microbatch.
using NextMicrobatch = std::function<void(int32_t* tokens, int32_t* targets)>;

class TrainStep {
 public:
  static absl::StatusOr<TrainStep> Create(LlamaModel& model, OptimizerPlugin& optimizer,
                                          int64_t batch, int64_t seq_len, int64_t accumulation,
                                          double max_norm);

  // Runs optimizer step `step` (1 on the first); a non-finite loss or gradient norm is an error
  // naming the step, and leaves the parameters as they were.
  absl::StatusOr<StepResult> Run(int64_t step, double lr, const NextMicrobatch& next);

  // exp_avg, exp_avg_sq, ... each as long as the model's flat parameter buffer.
  const Arena& optimizer_state() const { return state_; }

 private:
  TrainStep() = default;
  LlamaModel* model_ = nullptr;
  OptimizerPlugin* optimizer_ = nullptr;
  int64_t batch_ = 0, seq_len_ = 0, accumulation_ = 1;
  double max_norm_ = 0;
  std::vector<ParamSegment> segments_;
  Arena state_;
  std::vector<int32_t> tokens_, targets_;
};

// Scales `grads` so their global L2 norm is at most max_norm (0: no clipping), as
// torch.nn.utils.clip_grad_norm_ does; returns the norm before clipping.
double ClipGradNorm(float* grads, int64_t count, double max_norm);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_TRAIN_STEP_H_
