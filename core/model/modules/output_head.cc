#include "core/model/modules/output_head.h"

namespace titan {

namespace {
using R = ModuleContext;
}  // namespace

void OutputHead::ListActivations(OutputActs& acts, std::vector<ActivationSlot>& slots) const {
  const int64_t n = ctx_.n;
  slots.push_back({&acts.logits, "logits", {n * ctx_.local().vocab}, DType::kF32, {}});
  slots.push_back({&acts.lse, "loss_lse", {n}, DType::kF32, {}});
  slots.push_back({&acts.max, "loss_max", {n}, DType::kF32, {}});
  slots.push_back({&acts.target, "loss_target", {n}, DType::kF32, {}});
  slots.push_back({&acts.loss, "loss", {1}, DType::kF32, {}});
}

absl::StatusOr<float> OutputHead::Forward(const TensorView& x, const OutputActs& acts) {
  const LocalSizes local = ctx_.local();
  const int64_t n = ctx_.n;
  const TensorView logits = R::Reshaped(acts.logits, {n, local.vocab});
  TITAN_RETURN_IF_ERROR(output_.Forward(x, logits));
  Compute& c = ctx_.compute;
  TITAN_RETURN_IF_ERROR(c.CrossEntropyRowMax(logits, acts.max));
  TITAN_RETURN_IF_ERROR(ctx_.tp.AllReduceMax(acts.max));
  TITAN_RETURN_IF_ERROR(c.CrossEntropySumExp(logits, acts.max, acts.lse));
  TITAN_RETURN_IF_ERROR(
      c.CrossEntropyTargetLogit(logits, ctx_.target_ids, local.first_vocab, acts.target));
  TITAN_RETURN_IF_ERROR(ctx_.tp.AllReduceSum(acts.lse));
  TITAN_RETURN_IF_ERROR(ctx_.tp.AllReduceSum(acts.target));
  TITAN_RETURN_IF_ERROR(
      c.CrossEntropyFinish(acts.max, acts.target, ctx_.target_ids, acts.lse, acts.loss));
  float loss = 0;
  TITAN_RETURN_IF_ERROR(c.CopyToHost(acts.loss, &loss));
  return loss;
}

absl::Status OutputHead::Backward(const TensorView& x, const OutputActs& acts,
                                  const TensorView& dx) {
  const LocalSizes local = ctx_.local();
  const TensorView logits = R::Reshaped(acts.logits, {ctx_.n, local.vocab});
  const TensorView& d_logits = logits;  // the logits are spent: their gradient takes their place
  TITAN_RETURN_IF_ERROR(ctx_.compute.CrossEntropyBackward(logits, acts.lse, ctx_.target_ids,
                                                          local.first_vocab, 1.0f, d_logits));
  TITAN_RETURN_IF_ERROR(ctx_.Zero(dx));
  return output_.Backward(d_logits, x, dx);
}

}  // namespace titan
