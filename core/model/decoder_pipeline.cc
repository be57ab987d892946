// The model's side of pipeline parallelism (titan/pipeline.h): one stage's forward and
// backward for one microbatch, each microbatch's activations in a set of their own, and the
// zero-bubble split of the backward into input and weight gradients.
#include <cmath>
#include <limits>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "core/model/decoder_model.h"
#include "core/model/modules/linear.h"
#include "core/runtime/profiler.h"

namespace titan {

absl::Status DecoderModel::SetMicrobatches(std::vector<std::vector<int32_t>> tokens,
                                           std::vector<std::vector<int32_t>> targets, int64_t batch,
                                           int64_t seq_len) {
  if (tokens.empty() || tokens.size() != targets.size() || batch <= 0 || seq_len <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: expected one or more microbatches of tokens and targets and a positive batch and "
        "seq_len, found ",
        tokens.size(), " and ", targets.size(), " microbatches of ", batch, " x ", seq_len));
  }
  for (size_t m = 0; m < tokens.size(); ++m) {
    const size_t n = static_cast<size_t>(batch * seq_len);
    if (tokens[m].size() != n || targets[m].size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("model: microbatch ", m, " holds ",
                                                     tokens[m].size(), " tokens, expected ", n));
    }
    // This rank's tokens of each sequence, as the attention lays them out.
    TITAN_ASSIGN_OR_RETURN(tokens[m],
                           ctx_.attention->LocalTokens(tokens[m].data(), batch, seq_len));
    TITAN_ASSIGN_OR_RETURN(targets[m],
                           ctx_.attention->LocalTokens(targets[m].data(), batch, seq_len));
  }
  TITAN_ASSIGN_OR_RETURN(const int64_t local_seq_len, ctx_.attention->LocalSeqLen(seq_len));
  TITAN_RETURN_IF_ERROR(PlanActivations(batch, local_seq_len));
  for (size_t m = 0; m < tokens.size(); ++m) {
    TITAN_RETURN_IF_ERROR(CheckTokens(tokens[m].data(), targets[m].data()));
  }
  micro_tokens_ = std::move(tokens);
  micro_targets_ = std::move(targets);
  set_of_.assign(micro_tokens_.size(), -1);
  free_sets_.clear();
  for (int i = static_cast<int>(sets_.size()) - 1; i >= 0; --i) free_sets_.push_back(i);
  microbatch_losses_.assign(micro_tokens_.size(), std::numeric_limits<float>::quiet_NaN());
  return absl::OkStatus();
}

absl::StatusOr<const PipelineStage*> DecoderModel::LocalStage(int stage, int microbatch) const {
  if (microbatch < 0 || microbatch >= num_microbatches()) {
    return absl::OutOfRangeError(
        absl::StrCat("pipeline: microbatch ", microbatch, " of a step of ", num_microbatches()));
  }
  for (const PipelineStage& s : stages_) {
    if (s.stage == stage) return &s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("pipeline: stage ", stage, " is not on this rank"));
}

absl::StatusOr<DecoderModel::MicrobatchActs*> DecoderModel::SetFor(int microbatch) {
  int& index = set_of_[microbatch];
  if (index < 0) {
    if (free_sets_.empty()) {
      TITAN_RETURN_IF_ERROR(NewActivationSet().status());
      free_sets_.push_back(static_cast<int>(sets_.size()) - 1);
    }
    index = free_sets_.back();
    free_sets_.pop_back();
    sets_[index]->backwards_left = static_cast<int>(stages_.size());
  }
  return sets_[index].get();
}

void DecoderModel::ReleaseSet(int microbatch) {
  int& index = set_of_[microbatch];
  if (index >= 0 && --sets_[index]->backwards_left == 0) {
    free_sets_.push_back(index);
    index = -1;
  }
}

absl::StatusOr<TensorView> DecoderModel::Boundary(int stage, int microbatch, bool output,
                                                  bool gradient) {
  TITAN_ASSIGN_OR_RETURN(const PipelineStage* s, LocalStage(stage, microbatch));
  if (!output && stage == 0) {
    return absl::InvalidArgumentError("pipeline: stage 0 starts at the tokens, no input");
  }
  if (output && stage == num_stages_ - 1) {
    return absl::InvalidArgumentError("pipeline: the last stage ends in the loss, no output");
  }
  TITAN_ASSIGN_OR_RETURN(MicrobatchActs * set, SetFor(microbatch));
  const int64_t layer = output ? s->end_layer : s->first_layer;
  return gradient ? set->d_boundary[layer] : set->residual[layer];
}

absl::StatusOr<TensorView> DecoderModel::StageInput(int stage, int microbatch) {
  return Boundary(stage, microbatch, /*output=*/false, /*gradient=*/false);
}
absl::StatusOr<TensorView> DecoderModel::StageOutput(int stage, int microbatch) {
  return Boundary(stage, microbatch, /*output=*/true, /*gradient=*/false);
}
absl::StatusOr<TensorView> DecoderModel::OutputGrad(int stage, int microbatch) {
  return Boundary(stage, microbatch, /*output=*/true, /*gradient=*/true);
}
absl::StatusOr<TensorView> DecoderModel::InputGrad(int stage, int microbatch) {
  return Boundary(stage, microbatch, /*output=*/false, /*gradient=*/true);
}

absl::Status DecoderModel::Forward(int stage, int microbatch) {
  ScopedSpan span("module",
                  [&] { return absl::StrCat("stage", stage, ".forward mb", microbatch); });
  TITAN_ASSIGN_OR_RETURN(const PipelineStage* s, LocalStage(stage, microbatch));
  TITAN_ASSIGN_OR_RETURN(MicrobatchActs * set, SetFor(microbatch));
  Use(*set);
  if (stage == 0) {
    TITAN_RETURN_IF_ERROR(
        ctx_.compute.CopyFromHost(micro_tokens_[microbatch].data(), ctx_.token_ids));
    TITAN_RETURN_IF_ERROR(EmbedTokens(/*root_hooks=*/true));
  }
  TITAN_RETURN_IF_ERROR(ForwardLayers(s->first_layer, s->end_layer));
  if (stage == num_stages_ - 1) {
    TITAN_RETURN_IF_ERROR(
        ctx_.compute.CopyFromHost(micro_targets_[microbatch].data(), ctx_.target_ids));
    TITAN_ASSIGN_OR_RETURN(float loss, HeadForward(/*root_hooks=*/true));
    TITAN_ASSIGN_OR_RETURN(microbatch_losses_[microbatch], ctx_.attention->AverageLoss(loss));
  }
  return absl::OkStatus();
}

absl::Status DecoderModel::StageBackward(int stage, int microbatch, bool split) {
  ScopedSpan span("module", [&] {
    return absl::StrCat("stage", stage, split ? ".backward_input" : ".backward", " mb", microbatch);
  });
  TITAN_ASSIGN_OR_RETURN(const PipelineStage* s, LocalStage(stage, microbatch));
  if (set_of_[microbatch] < 0) {
    return absl::FailedPreconditionError(absl::StrCat("pipeline: the backward of stage ", stage,
                                                      " microbatch ", microbatch,
                                                      " before its forward"));
  }
  MicrobatchActs& set = *sets_[set_of_[microbatch]];
  Use(set);
  std::optional<WeightPass> pass;
  if (split) {
    if (set.deferred_arena.size() != static_cast<int>(deferred_plan_.entries().size())) {
      TITAN_ASSIGN_OR_RETURN(set.deferred_arena,
                             Arena::Allocate(deferred_plan_, ctx_.device, "deferred_gradients"));
    }
    std::vector<DeferredGrad>& work = set.deferred[s - stages_.data()];
    work.clear();
    pass.emplace(ctx_.compute, set.arena, set.deferred_arena, deferred_grad_entry_,
                 deferred_input_entry_, ctx_.parameters, work);
    ctx_.deferring = &*pass;
  }
  absl::Cleanup stop_deferring = [this] { ctx_.deferring = nullptr; };
  if (stage == num_stages_ - 1) {
    TITAN_RETURN_IF_ERROR(HeadBackward(/*root_hooks=*/true));
  } else {
    TITAN_RETURN_IF_ERROR(ctx_.compute.Copy(set.d_boundary[s->end_layer], d_residual()));
  }
  TITAN_RETURN_IF_ERROR(BackwardLayers(s->first_layer, s->end_layer));
  if (stage == 0) {
    TITAN_RETURN_IF_ERROR(EmbeddingBackward(/*root_hooks=*/true));
  } else {
    TITAN_RETURN_IF_ERROR(ctx_.compute.Copy(d_residual(), set.d_boundary[s->first_layer]));
  }
  if (!split) ReleaseSet(microbatch);
  return absl::OkStatus();
}

absl::Status DecoderModel::Backward(int stage, int microbatch) {
  return StageBackward(stage, microbatch, /*split=*/false);
}

absl::Status DecoderModel::BackwardInput(int stage, int microbatch) {
  return StageBackward(stage, microbatch, /*split=*/true);
}

absl::Status DecoderModel::BackwardWeight(int stage, int microbatch) {
  ScopedSpan span("module",
                  [&] { return absl::StrCat("stage", stage, ".backward_weight mb", microbatch); });
  TITAN_ASSIGN_OR_RETURN(const PipelineStage* s, LocalStage(stage, microbatch));
  if (set_of_[microbatch] < 0) {
    return absl::FailedPreconditionError(absl::StrCat("pipeline: the weight gradients of stage ",
                                                      stage, " microbatch ", microbatch,
                                                      " before its forward"));
  }
  MicrobatchActs& set = *sets_[set_of_[microbatch]];
  TITAN_RETURN_IF_ERROR(RunDeferredGrads(set, static_cast<int>(s - stages_.data())));
  ReleaseSet(microbatch);
  return absl::OkStatus();
}

absl::Status DecoderModel::RunDeferredGrads(MicrobatchActs& set, int local_stage) {
  Use(set);
  std::vector<DeferredGrad>& work = set.deferred[local_stage];
  // In the order BackwardInput left them, each module's between its backward hooks (which is
  // where fsdp gives the parameters gradient memory and reduces it afterwards).
  for (size_t k = 0; k < work.size();) {
    const int layer = work[k].layer;
    ModuleNode& module = layer < 0 ? root_ : *layer_module_[layer];
    TITAN_RETURN_IF_ERROR(module.BeforeBackward());
    for (; k < work.size() && work[k].layer == layer; ++k) {
      const DeferredGrad& g = work[k];
      const Parameter& p = ctx_.parameters[g.weight];
      switch (g.kind) {
        case DeferredGrad::kProjection:
          TITAN_RETURN_IF_ERROR(
              Linear(ctx_, g.weight)
                  .WeightGrad(ModuleContext::Reshaped(g.saved, {g.rows, p.value.shape[0]}), g.in));
          break;
        case DeferredGrad::kNorm:
          TITAN_RETURN_IF_ERROR(
              ctx_.compute.Accumulate(ModuleContext::Reshaped(g.saved, {p.grad.numel()}), p.grad));
          break;
        case DeferredGrad::kEmbedding:
          TITAN_RETURN_IF_ERROR(
              embedding_->WeightGrad(ModuleContext::Reshaped(g.saved, {g.rows * config_.dim})));
          break;
      }
    }
    TITAN_RETURN_IF_ERROR(module.AfterBackward());
  }
  work.clear();
  return absl::OkStatus();
}

}  // namespace titan
