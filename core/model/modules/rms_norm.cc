#include "core/model/modules/rms_norm.h"

#include "core/model/modules/weight_pass.h"

namespace titan {

absl::Status RmsNorm::Forward(const TensorView& inp, const TensorView& out, const TensorView& rstd,
                              bool leave_gather) {
  const int64_t d = ctx_.config.dim, nl = ctx_.n_local;
  // On one rank the kernel writes `out` in its dtype (a bf16 one rounded once, as a cast of the
  // f32 result would); tensor parallelism gathers every rank's tokens in f32 and rounds them after.
  const bool direct = out.dtype == DType::kF32 || ctx_.tp.size() == 1;
  const TensorView full =
      direct ? out : ModuleContext::Reshaped(ctx_.scratch.d_norm_out, out.shape);
  const TensorView local = ctx_.tp.size() > 1
                               ? ModuleContext::Reshaped(ctx_.scratch.tokens_local, {nl, d})
                               : ModuleContext::Reshaped(full, {nl, d});
  TITAN_RETURN_IF_ERROR(ctx_.compute.RmsNormForward(
      ModuleContext::Reshaped(inp, {nl, d}), ctx_.parameters[weight_].value, ctx_.config.norm_eps,
      local, ModuleContext::Reshaped(rstd, {nl})));
  TITAN_RETURN_IF_ERROR(ctx_.GatherTokens(ModuleContext::Reshaped(local, {nl * d}),
                                          ModuleContext::Reshaped(full, {full.numel()}), out));
  return leave_gather ? absl::OkStatus() : ctx_.FinishGather();
}

absl::Status RmsNorm::Backward(const TensorView& d_out_full, const TensorView& inp,
                               const TensorView& rstd, const TensorView& d_inp) {
  const int64_t d = ctx_.config.dim, nl = ctx_.n_local;
  TensorView d_out;
  if (ctx_.scattered_grad && ctx_.scattered_grad->full == d_out_full.data) {
    d_out = ctx_.scattered_grad->local;  // reduce-scattered under the last projection's matmul
  } else {
    TITAN_ASSIGN_OR_RETURN(
        d_out,
        ctx_.tp.ReduceScatterTokens(ModuleContext::Reshaped(d_out_full, {d_out_full.numel()}),
                                    ModuleContext::Reshaped(ctx_.scratch.tokens_local, {nl * d})));
  }
  ctx_.scattered_grad.reset();
  const Parameter& p = ctx_.parameters[weight_];
  const TensorView dout = ModuleContext::Reshaped(d_out, {nl, d});
  const TensorView x = ModuleContext::Reshaped(inp, {nl, d});
  const TensorView r = ModuleContext::Reshaped(rstd, {nl});
  const TensorView dx = ModuleContext::Reshaped(d_inp, {nl, d});
  if (ctx_.tp.size() == 1 && ctx_.deferring == nullptr) {
    return ctx_.compute.RmsNormBackward(dout, x, p.value, r, dx, p.grad);
  }
  // Accumulated apart (and summed over the tensor-parallel ranks) first: the gradient may
  // already hold earlier microbatches' sums, which must not be summed again. The zero-bubble
  // split keeps it for BackwardWeight.
  TensorView sum = ctx_.scratch.norm_grad;
  if (ctx_.deferring != nullptr) {
    TITAN_ASSIGN_OR_RETURN(sum, ctx_.deferring->Keep(ctx_.F32(nullptr, {d}), weight_, false));
  }
  sum = ctx_.F32(sum.data, {d});
  TITAN_RETURN_IF_ERROR(ctx_.Zero(sum));
  TITAN_RETURN_IF_ERROR(ctx_.compute.RmsNormBackward(dout, x, p.value, r, dx, sum));
  TITAN_RETURN_IF_ERROR(ctx_.tp.AllReduceSum(sum));
  if (ctx_.deferring != nullptr) {
    ctx_.deferring->Add(DeferredGrad::kNorm, weight_, 1, sum, TensorView{});
    return absl::OkStatus();
  }
  return ctx_.compute.Accumulate(sum, p.grad);
}

absl::Status HeadRmsNorm::Forward(const TensorView& inp, const TensorView& out,
                                  const TensorView& rstd) {
  return ctx_.compute.RmsNormForward(inp, ctx_.parameters[weight_].value, ctx_.config.norm_eps, out,
                                     rstd);
}

absl::Status HeadRmsNorm::Backward(const TensorView& d_out, const TensorView& inp,
                                   const TensorView& rstd, const TensorView& d_inp) {
  const Parameter& p = ctx_.parameters[weight_];
  if (ctx_.tp.size() == 1 && ctx_.deferring == nullptr) {
    return ctx_.compute.RmsNormBackward(d_out, inp, p.value, rstd, d_inp, p.grad);
  }
  // As RmsNorm's: summed apart over the tensor-parallel ranks, or kept for the weight pass.
  const int64_t hd = p.value.numel();
  TensorView sum = ctx_.scratch.norm_grad;
  if (ctx_.deferring != nullptr) {
    TITAN_ASSIGN_OR_RETURN(sum, ctx_.deferring->Keep(ctx_.F32(nullptr, {hd}), weight_, false));
  }
  sum = ctx_.F32(sum.data, {hd});
  TITAN_RETURN_IF_ERROR(ctx_.Zero(sum));
  TITAN_RETURN_IF_ERROR(ctx_.compute.RmsNormBackward(d_out, inp, p.value, rstd, d_inp, sum));
  TITAN_RETURN_IF_ERROR(ctx_.tp.AllReduceSum(sum));
  if (ctx_.deferring != nullptr) {
    ctx_.deferring->Add(DeferredGrad::kNorm, weight_, 1, sum, TensorView{});
    return absl::OkStatus();
  }
  return ctx_.compute.Accumulate(sum, p.grad);
}

}  // namespace titan
