#include "core/train/train_step.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace titan {

double SumOfSquares(const float* values, int64_t count) {
  double sum = 0;
#pragma omp parallel for reduction(+ : sum)
  for (int64_t i = 0; i < count; ++i) sum += static_cast<double>(values[i]) * values[i];
  return sum;
}

double ClipGradNorm(float* grads, int64_t count, double max_norm) {
  const double norm = std::sqrt(SumOfSquares(grads, count));
  ClipToNorm(grads, count, norm, max_norm);
  return norm;
}

void ClipToNorm(float* grads, int64_t count, double norm, double max_norm) {
  if (max_norm > 0 && std::isfinite(norm)) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) {
      const float c = static_cast<float>(coef);
#pragma omp parallel for
      for (int64_t i = 0; i < count; ++i) grads[i] *= c;
    }
  }
}

absl::StatusOr<TrainStep> TrainStep::Create(LlamaModel& model, OptimizerPlugin& optimizer,
                                            int64_t batch, int64_t seq_len, int64_t accumulation,
                                            double max_norm, DataParallelContext dp) {
  if (batch < 1 || seq_len < 1 || accumulation < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TrainStep: expected batch, seq_len and accumulation steps >= 1, found ",
                     batch, ", ", seq_len, ", ", accumulation));
  }
  TrainStep step;
  step.model_ = &model, step.optimizer_ = &optimizer;
  step.batch_ = batch, step.seq_len_ = seq_len, step.accumulation_ = accumulation;
  step.max_norm_ = max_norm;
  step.dp_ = dp;
  std::optional<LocalParameters> local;
  if (dp.plugin != nullptr) local = dp.plugin->local_parameters();
  if (!local && dp.tensor_parallel != nullptr) local = dp.tensor_parallel->local_parameters();
  if (local) {
    step.params_ = local->params.data_as<float>();
    step.grads_ = local->grads.data_as<float>();
    step.count_ = local->params.numel();
    step.segments_ = local->segments;
  } else {
    step.params_ = model.params().flat_data();
    step.grads_ = model.grads().flat_data();
    step.count_ = static_cast<int64_t>(model.params().flat_size());
    for (const Parameter& p : model.Parameters()) {
      step.segments_.push_back(
          {p.value.data_as<const float>() - step.params_, p.value.numel(), p.weight_decay});
    }
  }
  const int64_t count = step.count_;
  // The arena pads each tensor to 64 bytes; a count that is a multiple of 16 floats (the model's
  // buffer always is) keeps the slots back to back as OptimizerStep::state expects.
  if (optimizer.StateNames().size() > 1 && count % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("TrainStep: the optimizer's flat buffer of ",
                                                   count, " values is not a multiple of 16"));
  }
  ArenaPlan plan;
  for (const std::string& name : optimizer.StateNames()) {
    TITAN_RETURN_IF_ERROR(plan.Add(name, {count}).status());
  }
  TITAN_ASSIGN_OR_RETURN(step.state_, Arena::Allocate(plan));
  step.tokens_.resize(batch * seq_len);
  step.targets_.resize(batch * seq_len);
  return step;
}

int64_t TrainStep::state_bytes() const {
  return (2 * count_ + static_cast<int64_t>(state_.flat_size())) *
         static_cast<int64_t>(sizeof(float));
}

absl::Status TrainStep::ReduceLoss(double& loss) const {
  if (dp_.loss_group == nullptr || dp_.loss_group->size() == 1) return absl::OkStatus();
  float value = static_cast<float>(loss);
  TITAN_RETURN_IF_ERROR(dp_.loss_group->AllReduce(FlatF32(&value, 1), ReduceOp::kAvg));
  loss = value;
  return absl::OkStatus();
}

absl::StatusOr<double> TrainStep::GradNorm() const {
  // The groups whose ranks hold different parts of the gradient: their squared norms add up.
  std::vector<std::pair<Communicator*, MeshDim>> groups;
  for (ParallelPlugin* plugin : {dp_.plugin, dp_.tensor_parallel}) {
    Communicator* group = plugin != nullptr ? plugin->gradient_shard_group() : nullptr;
    if (group != nullptr && group->size() > 1) groups.emplace_back(group, plugin->dimension());
  }
  double sum = 0;
  for (const Parameter& p : model_->Parameters()) {
    const bool flat =
        p.placements[static_cast<int>(MeshDim::kDpShard)].kind == Placement::Kind::kFlatShard;
    const TensorView& held = flat ? p.shard_grad : p.grad;
    // A parameter replicated along a group's dimension (the norms under tp) sits on each of its
    // ranks: each counts its share, so the sum over the group counts it once.
    double weight = 1;
    for (const auto& [group, dim] : groups) {
      if (p.placements[static_cast<int>(dim)].kind == Placement::Kind::kReplicate) {
        weight /= group->size();
      }
    }
    sum += weight * SumOfSquares(held.data_as<const float>(), held.numel());
  }
  for (const auto& [group, dim] : groups) {
    // Two floats carry the double: the high part and what it misses.
    float parts[2] = {static_cast<float>(sum), 0.0f};
    parts[1] = static_cast<float>(sum - static_cast<double>(parts[0]));
    TITAN_RETURN_IF_ERROR(group->AllReduce(FlatF32(parts, 2), ReduceOp::kSum));
    sum = static_cast<double>(parts[0]) + static_cast<double>(parts[1]);
  }
  return std::sqrt(sum);
}

absl::StatusOr<StepResult> TrainStep::Run(int64_t step, double lr, const NextMicrobatch& next) {
  // The optimizers compute in f32: an lr beyond its range would make every weight inf, and the
  // next step would blame its NaN loss.
  if (!std::isfinite(lr) || std::abs(lr) > std::numeric_limits<float>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "step ", step, ": the learning rate is ", lr,
        " (optimizer.lr x the lr_scheduler's factor), expected a finite value within f32's range "
        "(the optimizers compute in f32); stopping before the optimizer runs"));
  }
  std::fill(grads_, grads_ + count_, 0.0f);
  StepResult result;
  for (int64_t micro = 0; micro < accumulation_; ++micro) {
    if (dp_.plugin != nullptr) dp_.plugin->set_requires_gradient_sync(micro + 1 == accumulation_);
    next(tokens_.data(), targets_.data());
    TITAN_ASSIGN_OR_RETURN(float loss,
                           model_->Forward(tokens_.data(), targets_.data(), batch_, seq_len_));
    result.loss += loss / static_cast<double>(accumulation_);
    TITAN_RETURN_IF_ERROR(model_->Backward());
  }
  if (dp_.plugin != nullptr) TITAN_RETURN_IF_ERROR(dp_.plugin->WaitForGradients());
  // Checked once the ranks have averaged their losses, so that every rank stops together.
  TITAN_RETURN_IF_ERROR(ReduceLoss(result.loss));
  if (!std::isfinite(result.loss)) {
    return absl::InternalError(absl::StrCat("step ", step, ": the loss is ", result.loss,
                                            "; stopping (lower optimizer.lr or check the data)"));
  }
  float* grads = grads_;
  const int64_t count = count_;
  if (accumulation_ > 1) {
    // Each microbatch's loss is a mean over its tokens: averaging makes the step's gradient that
    // of the mean loss over the global batch.
    const float scale = 1.0f / static_cast<float>(accumulation_);
#pragma omp parallel for
    for (int64_t i = 0; i < count; ++i) grads[i] *= scale;
  }
  TITAN_ASSIGN_OR_RETURN(result.grad_norm, GradNorm());
  ClipToNorm(grads, count, result.grad_norm, max_norm_);
  if (!std::isfinite(result.grad_norm)) {
    return absl::InternalError(absl::StrCat("step ", step, ": the gradient norm is ",
                                            result.grad_norm,
                                            "; stopping (lower optimizer.lr or check the data)"));
  }
  const int64_t state_count = static_cast<int64_t>(state_.flat_size());
  OptimizerStep update{FlatF32(params_, count),
                       FlatF32(grads, count),
                       FlatF32(state_count > 0 ? state_.flat_data() : nullptr, state_count),
                       segments_,
                       lr,
                       step};
  TITAN_RETURN_IF_ERROR(optimizer_->Step(update));
  return result;
}

}  // namespace titan
