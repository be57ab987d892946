#include "core/train/train_step.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace titan {

double ClipGradNorm(float* grads, int64_t count, double max_norm) {
  double sum = 0;
#pragma omp parallel for reduction(+ : sum)
  for (int64_t i = 0; i < count; ++i) sum += static_cast<double>(grads[i]) * grads[i];
  const double norm = std::sqrt(sum);
  if (max_norm > 0 && std::isfinite(norm)) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) {
      const float c = static_cast<float>(coef);
#pragma omp parallel for
      for (int64_t i = 0; i < count; ++i) grads[i] *= c;
    }
  }
  return norm;
}

absl::StatusOr<TrainStep> TrainStep::Create(LlamaModel& model, OptimizerPlugin& optimizer,
                                            int64_t batch, int64_t seq_len, int64_t accumulation,
                                            double max_norm) {
  if (batch < 1 || seq_len < 1 || accumulation < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TrainStep: expected batch, seq_len and accumulation steps >= 1, found ",
                     batch, ", ", seq_len, ", ", accumulation));
  }
  TrainStep step;
  step.model_ = &model, step.optimizer_ = &optimizer;
  step.batch_ = batch, step.seq_len_ = seq_len, step.accumulation_ = accumulation;
  step.max_norm_ = max_norm;
  const float* params = model.params().flat_data();
  const int64_t count = static_cast<int64_t>(model.params().flat_size());
  for (const Parameter& p : model.Parameters()) {
    step.segments_.push_back(
        {static_cast<const float*>(p.value.data) - params, p.value.numel(), p.weight_decay});
  }
  // The arena pads each tensor to 64 bytes and the parameter buffer is a multiple of that, so
  // the slots lie back to back as OptimizerStep::state expects.
  ArenaPlan plan;
  for (const std::string& name : optimizer.StateNames()) {
    TITAN_RETURN_IF_ERROR(plan.Add(name, {count}).status());
  }
  TITAN_ASSIGN_OR_RETURN(step.state_, Arena::Allocate(plan));
  step.tokens_.resize(batch * seq_len);
  step.targets_.resize(batch * seq_len);
  return step;
}

absl::StatusOr<StepResult> TrainStep::Run(int64_t step, double lr, const NextMicrobatch& next) {
  model_->ZeroGrad();
  StepResult result;
  for (int64_t micro = 0; micro < accumulation_; ++micro) {
    next(tokens_.data(), targets_.data());
    TITAN_ASSIGN_OR_RETURN(float loss,
                           model_->Forward(tokens_.data(), targets_.data(), batch_, seq_len_));
    if (!std::isfinite(loss)) {
      return absl::InternalError(absl::StrCat("step ", step, ": the loss is ", loss,
                                              "; stopping (lower optimizer.lr or check the data)"));
    }
    result.loss += loss / static_cast<double>(accumulation_);
    TITAN_RETURN_IF_ERROR(model_->Backward());
  }
  float* grads = model_->grads().flat_data();
  const int64_t count = static_cast<int64_t>(model_->grads().flat_size());
  if (accumulation_ > 1) {
    // Each microbatch's loss is a mean over its tokens: averaging makes the step's gradient that
    // of the mean loss over the global batch.
    const float scale = 1.0f / static_cast<float>(accumulation_);
#pragma omp parallel for
    for (int64_t i = 0; i < count; ++i) grads[i] *= scale;
  }
  result.grad_norm = ClipGradNorm(grads, count, max_norm_);
  if (!std::isfinite(result.grad_norm)) {
    return absl::InternalError(absl::StrCat("step ", step, ": the gradient norm is ",
                                            result.grad_norm,
                                            "; stopping (lower optimizer.lr or check the data)"));
  }
  const int64_t state_count = static_cast<int64_t>(state_.flat_size());
  OptimizerStep update{FlatF32(model_->params().flat_data(), count),
                       FlatF32(grads, count),
                       FlatF32(state_count > 0 ? state_.flat_data() : nullptr, state_count),
                       segments_,
                       lr,
                       step};
  TITAN_RETURN_IF_ERROR(optimizer_->Step(update));
  return result;
}

}  // namespace titan
