#include "core/train/train_step.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/profiler.h"

namespace titan {

absl::Status ClipToNorm(Compute& compute, const TensorView& grads, double norm, double max_norm) {
  if (max_norm > 0 && std::isfinite(norm)) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) return compute.Scale(grads, static_cast<float>(coef));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> ClipGradNorm(Compute& compute, const TensorView& grads,
                                    const TensorView& scratch, double max_norm) {
  float parts[2];
  const double weight = 1;
  TITAN_RETURN_IF_ERROR(compute.SumOfSquares({&grads, 1}, {&weight, 1}, scratch));
  TITAN_RETURN_IF_ERROR(compute.CopyToHost(scratch, parts));
  const double norm = std::sqrt(static_cast<double>(parts[0]) + static_cast<double>(parts[1]));
  TITAN_RETURN_IF_ERROR(ClipToNorm(compute, grads, norm, max_norm));
  return norm;
}

absl::StatusOr<TrainStep> TrainStep::Create(DecoderModel& model, OptimizerPlugin& optimizer,
                                            int64_t batch, int64_t seq_len, int64_t accumulation,
                                            double max_norm, DataParallelContext dp) {
  if (batch < 1 || seq_len < 1 || accumulation < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TrainStep: expected batch, seq_len and accumulation steps >= 1, found ",
                     batch, ", ", seq_len, ", ", accumulation));
  }
  if (dp.pipeline_microbatches < 1 || batch % dp.pipeline_microbatches != 0) {
    return absl::InvalidArgumentError(absl::StrCat("TrainStep: a local batch of ", batch,
                                                   " sequences does not split into ",
                                                   dp.pipeline_microbatches, " microbatches"));
  }
  Compute& compute = model.compute();
  const DeviceType device = compute.device().type;
  if (!optimizer.SupportsDevice(device)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "TrainStep: the optimizer plugin updates host buffers itself and runs on the cpu only, "
        "but the model computes on ",
        device == DeviceType::kCuda ? "cuda" : "cpu",
        "; use an optimizer that computes through OptimizerStep::compute (adamw, adam, sgd)"));
  }
  TrainStep step;
  step.model_ = &model, step.optimizer_ = &optimizer, step.compute_ = &compute;
  step.batch_ = batch, step.seq_len_ = seq_len, step.accumulation_ = accumulation;
  step.max_norm_ = max_norm;
  step.dp_ = dp;
  std::optional<LocalParameters> local;
  for (ParallelPlugin* plugin : dp.parameter_keepers) {
    local = plugin->parameter_shards()->local_parameters();
    if (local) break;
  }
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
  TITAN_ASSIGN_OR_RETURN(step.state_, Arena::Allocate(plan, model.device(), "optimizer_state"));
  if (dp.replica_groups != nullptr && dp.replica_groups->settings().diloco) {
    ArenaPlan outer;
    for (const char* name : {"synced_params", "momentum_buffer"}) {
      TITAN_RETURN_IF_ERROR(outer.Add(name, {count}).status());
    }
    TITAN_ASSIGN_OR_RETURN(step.outer_state_,
                           Arena::Allocate(outer, model.device(), "outer_optimizer_state"));
  }
  ArenaPlan norm_plan;
  TITAN_RETURN_IF_ERROR(norm_plan.Add("grad_norm_parts", {2}).status());
  TITAN_ASSIGN_OR_RETURN(step.norm_parts_,
                         Arena::Allocate(norm_plan, model.device(), "grad_norm_parts"));
  step.tokens_.resize(batch * seq_len);
  step.targets_.resize(batch * seq_len);
  return step;
}

TensorView TrainStep::Flat(float* data, int64_t count) const {
  TensorView view = FlatF32(data, count);
  view.device = compute_->device();
  return view;
}

int64_t TrainStep::state_bytes() const {
  return (2 * count_ + static_cast<int64_t>(state_.flat_size() + outer_state_.flat_size())) *
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
  ScopedSpan span("optimizer", "grad_norm");
  // The groups whose ranks hold different parts of the gradient: their squared norms add up.
  std::vector<std::pair<Communicator*, MeshDim>> groups;
  for (ParallelPlugin* plugin : dp_.parameter_keepers) {
    Communicator* group = plugin->parameter_shards()->gradient_shard_group();
    if (group != nullptr && group->size() > 1) groups.emplace_back(group, plugin->dimension());
  }
  std::vector<TensorView> held;
  std::vector<double> weights;
  for (const Parameter& p : model_->Parameters()) {
    const bool flat =
        p.placements[static_cast<int>(MeshDim::kDpShard)].kind == Placement::Kind::kFlatShard;
    held.push_back(flat ? p.shard_grad : p.grad);
    // A parameter replicated along a group's dimension (the norms under tp) sits on each of its
    // ranks: each counts its share, so the sum over the group counts it once.
    double weight = 1;
    for (const auto& [group, dim] : groups) {
      if (p.placements[static_cast<int>(dim)].kind == Placement::Kind::kReplicate) {
        weight /= group->size();
      }
    }
    weights.push_back(weight);
  }
  // The sum travels as two floats, the high part and what it misses.
  const TensorView parts_view = norm_parts_.at(0).view();
  TITAN_RETURN_IF_ERROR(compute_->SumOfSquares(held, weights, parts_view));
  for (const auto& [group, dim] : groups) {
    TITAN_RETURN_IF_ERROR(group->AllReduce(parts_view, ReduceOp::kSum));
  }
  // The pp ranks hold different stages' parameters, none twice.
  if (dp_.pipeline_group != nullptr && dp_.pipeline_group->size() > 1) {
    TITAN_RETURN_IF_ERROR(dp_.pipeline_group->AllReduce(parts_view, ReduceOp::kSum));
  }
  float parts[2];
  TITAN_RETURN_IF_ERROR(compute_->CopyToHost(parts_view, parts));
  return std::sqrt(static_cast<double>(parts[0]) + static_cast<double>(parts[1]));
}

absl::StatusOr<double> TrainStep::RunPipeline(bool last_accumulation, const NextMicrobatch& next,
                                              PipelineStepStats& stats) {
  // The local batch as the data-parallel run reads it, split into microbatches of whole rows.
  next(tokens_.data(), targets_.data());
  const int64_t count = dp_.pipeline_microbatches, rows = batch_ / count;
  const int64_t size = rows * seq_len_;
  std::vector<std::vector<int32_t>> tokens(count), targets(count);
  for (int64_t m = 0; m < count; ++m) {
    tokens[m].assign(tokens_.begin() + m * size, tokens_.begin() + (m + 1) * size);
    targets[m].assign(targets_.begin() + m * size, targets_.begin() + (m + 1) * size);
  }
  TITAN_RETURN_IF_ERROR(
      model_->SetMicrobatches(std::move(tokens), std::move(targets), rows, seq_len_));
  PipelineStepOptions options;
  options.data_parallel = dp_.data_parallel;
  options.sync_gradients = last_accumulation;
  TITAN_ASSIGN_OR_RETURN(PipelineStepStats ran, CallPluginOf(*dp_.pipeline, "RunSchedule", [&] {
                           return dp_.pipeline->RunSchedule(options);
                         }));
  stats.step_seconds += ran.step_seconds;
  stats.compute_seconds += ran.compute_seconds;
  stats.theoretical_bubble = ran.theoretical_bubble;
  if (!model_->holds_last_stage()) return 0.0;
  double loss = 0;
  for (float l : model_->microbatch_losses()) loss += l;
  return loss / static_cast<double>(count);
}

absl::Status TrainStep::BalanceExperts(StepResult& result) {
  std::vector<DecoderModel::ExpertLoad> loads = model_->TakeExpertLoads();
  if (loads.empty()) return absl::OkStatus();
  // Summed in f32, exact below 2^24 tokens per expert and step.
  std::vector<float> flat;
  for (const DecoderModel::ExpertLoad& load : loads) {
    for (int64_t tokens : load.tokens) flat.push_back(static_cast<float>(tokens));
  }
  for (Communicator* group : dp_.token_groups) {
    if (group == nullptr || group->size() == 1) continue;
    TITAN_RETURN_IF_ERROR(
        group->AllReduce(FlatF32(flat.data(), static_cast<int64_t>(flat.size())), ReduceOp::kSum));
  }
  size_t next = 0;
  result.expert_tokens.assign(loads.front().tokens.size(), 0);
  for (DecoderModel::ExpertLoad& load : loads) {
    int64_t total = 0, most = 0;
    for (size_t e = 0; e < load.tokens.size(); ++e) {
      load.tokens[e] = static_cast<int64_t>(flat[next++]);
      result.expert_tokens[e] += load.tokens[e];
      total += load.tokens[e];
      most = std::max(most, load.tokens[e]);
    }
    if (total > 0) {
      const double mean = static_cast<double>(total) / static_cast<double>(load.tokens.size());
      result.expert_imbalance = std::max(result.expert_imbalance, static_cast<double>(most) / mean);
    }
  }
  return model_->BalanceExperts(loads);
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
  const TensorView grads = Flat(grads_, count_);
  TITAN_RETURN_IF_ERROR(compute_->Fill(grads, 0.0f));
  StepResult result;
  for (int64_t micro = 0; micro < accumulation_; ++micro) {
    if (dp_.pipeline != nullptr) {
      TITAN_ASSIGN_OR_RETURN(double loss,
                             RunPipeline(micro + 1 == accumulation_, next, result.pipeline));
      result.loss += loss / static_cast<double>(accumulation_);
      continue;
    }
    if (dp_.data_parallel != nullptr) {
      dp_.data_parallel->set_requires_gradient_sync(micro + 1 == accumulation_);
    }
    next(tokens_.data(), targets_.data());
    TITAN_ASSIGN_OR_RETURN(float loss,
                           model_->Forward(tokens_.data(), targets_.data(), batch_, seq_len_));
    result.loss += loss / static_cast<double>(accumulation_);
    TITAN_RETURN_IF_ERROR(model_->Backward());
  }
  if (dp_.data_parallel != nullptr) {
    TITAN_RETURN_IF_ERROR(Traced("sync", "wait_for_gradients", [&] {
      return CallPluginOf(*dp_.data_parallel, "WaitForGradients",
                          [&] { return dp_.data_parallel->WaitForGradients(); });
    }));
  }
  if (dp_.context_group != nullptr && dp_.context_group->size() > 1) {
    // Each cp rank's gradient is of the mean loss over its own tokens; the sequence's is their
    // mean (every rank holds as many tokens).
    TITAN_RETURN_IF_ERROR(dp_.context_group->AllReduce(grads, ReduceOp::kAvg));
  }
  if (dp_.pipeline_group != nullptr && dp_.pipeline_group->size() > 1) {
    // Only the last stage's rank computed the loss; the others hold 0.
    float loss = static_cast<float>(result.loss);
    TITAN_RETURN_IF_ERROR(dp_.pipeline_group->AllReduce(FlatF32(&loss, 1), ReduceOp::kSum));
    result.loss = loss;
  }
  if (model_->config().moe.aux_loss_alpha > 0) {
    // Each stage's layers add theirs; then averaged over the ranks as the loss is.
    float aux = static_cast<float>(model_->TakeAuxLoss() /
                                   static_cast<double>(accumulation_ * dp_.pipeline_microbatches));
    if (dp_.pipeline_group != nullptr && dp_.pipeline_group->size() > 1) {
      TITAN_RETURN_IF_ERROR(dp_.pipeline_group->AllReduce(FlatF32(&aux, 1), ReduceOp::kSum));
    }
    double reduced = aux;
    TITAN_RETURN_IF_ERROR(ReduceLoss(reduced));
    result.aux_loss = reduced;
  }
  // Checked once the ranks have averaged their losses, so that every rank stops together.
  TITAN_RETURN_IF_ERROR(ReduceLoss(result.loss));
  if (!std::isfinite(result.loss)) {
    return absl::InternalError(absl::StrCat("step ", step, ": the loss is ", result.loss,
                                            "; stopping (lower optimizer.lr or check the data)"));
  }
  const int64_t microbatches = accumulation_ * dp_.pipeline_microbatches;
  if (microbatches > 1) {
    // Each microbatch's loss is a mean over its tokens: averaging makes the step's gradient that
    // of the mean loss over the global batch.
    TITAN_RETURN_IF_ERROR(compute_->Scale(grads, 1.0f / static_cast<float>(microbatches)));
  }
  const int64_t sync_steps =
      dp_.replica_groups != nullptr ? dp_.replica_groups->settings().sync_steps : 0;
  if (dp_.replica_groups != nullptr && sync_steps == 0) {
    TITAN_RETURN_IF_ERROR(Traced("sync", "average_across_replica_groups", [&] {
      return dp_.replica_groups->Average(step, *compute_, grads, result.loss);
    }));
  }
  TITAN_ASSIGN_OR_RETURN(result.grad_norm, GradNorm());
  TITAN_RETURN_IF_ERROR(ClipToNorm(*compute_, grads, result.grad_norm, max_norm_));
  if (!std::isfinite(result.grad_norm)) {
    return absl::InternalError(absl::StrCat("step ", step, ": the gradient norm is ",
                                            result.grad_norm,
                                            "; stopping (lower optimizer.lr or check the data)"));
  }
  TITAN_RETURN_IF_ERROR(BalanceExperts(result));
  const int64_t state_count = static_cast<int64_t>(state_.flat_size());
  OptimizerStep update{Flat(params_, count_),
                       grads,
                       Flat(state_count > 0 ? state_.flat_data() : nullptr, state_count),
                       segments_,
                       lr,
                       step,
                       compute_};
  TITAN_RETURN_IF_ERROR(Traced("optimizer", "optimizer.step", [&] {
    return CallPluginOf(*optimizer_, "Step", [&] { return optimizer_->Step(update); });
  }));
  if (sync_steps > 0 && step % sync_steps == 0) {
    TITAN_RETURN_IF_ERROR(SyncReplicaGroups(step, result.loss));
  }
  if (dp_.float8_scales != nullptr) {
    TITAN_RETURN_IF_ERROR(Traced("optimizer", "precompute_float8_scales", [&] {
      return CallPluginOf(*dp_.float8_scales, "PrecomputeFloat8Scales",
                          [&] { return dp_.float8_scales->PrecomputeFloat8Scales(); });
    }));
  }
  return result;
}

absl::Status TrainStep::SyncReplicaGroups(int64_t step, double& loss) {
  if (dp_.replica_groups->settings().diloco) {
    return Traced("sync", "diloco_outer_step", [&] { return DilocoSync(step, loss); });
  }
  // LocalSGD: the groups stepped on their own gradients; their parameters are averaged.
  return Traced("sync", "average_parameters_across_replica_groups", [&] {
    return dp_.replica_groups->Average(step, *compute_, Flat(params_, count_), loss);
  });
}

absl::Status TrainStep::StartOuterState() {
  if (outer_state_.size() == 0) return absl::OkStatus();
  TITAN_RETURN_IF_ERROR(compute_->Copy(Flat(params_, count_), outer_state_.at(0).view()));
  return compute_->Fill(outer_state_.at(1).view(), 0.0f);
}

// DiLoCo (Douillard et al. 2023), as torchft runs it: the pseudo-gradient synced - local is
// averaged over the groups, an outer SGD with Nesterov momentum steps the synced parameters by
// it, and the local parameters become the new synced ones (mixed with the local ones by
// fragment_update_alpha). The gradient buffer, free after the inner update, holds the
// pseudo-gradient. With outer_lr 1 and no momentum this is LocalSGD's parameter average.
absl::Status TrainStep::DilocoSync(int64_t step, double& loss) {
  const FaultToleranceSettings& ft = dp_.replica_groups->settings();
  const TensorView params = Flat(params_, count_), delta = Flat(grads_, count_);
  const TensorView synced = outer_state_.at(0).view(), momentum = outer_state_.at(1).view();
  TITAN_RETURN_IF_ERROR(compute_->Copy(params, delta));
  TITAN_RETURN_IF_ERROR(compute_->Scale(delta, -1.0f));
  TITAN_RETURN_IF_ERROR(compute_->Accumulate(synced, delta));
  TITAN_RETURN_IF_ERROR(dp_.replica_groups->Average(step, *compute_, delta, loss));
  SgdUpdate outer;
  outer.lr = ft.outer_lr;
  outer.momentum = ft.outer_momentum;
  outer.nesterov = ft.outer_momentum > 0;
  outer.step = step / ft.sync_steps;  // the first sync starts the momentum buffer
  TITAN_RETURN_IF_ERROR(compute_->SgdStep(outer, synced, delta, momentum));
  const float alpha = static_cast<float>(ft.fragment_update_alpha);
  if (alpha == 0.0f) return compute_->Copy(synced, params);
  TITAN_RETURN_IF_ERROR(compute_->Scale(params, alpha));
  TITAN_RETURN_IF_ERROR(compute_->Copy(synced, delta));
  TITAN_RETURN_IF_ERROR(compute_->Scale(delta, 1.0f - alpha));
  return compute_->Accumulate(delta, params);
}

}  // namespace titan
