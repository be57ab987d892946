#include "core/model/modules/linear.h"

#include "absl/strings/str_cat.h"
#include "core/model/modules/weight_pass.h"

namespace titan {

absl::StatusOr<TensorView> Linear::WeightOperand() { return ctx_.WeightOperand(weight_); }

absl::StatusOr<Float8Operand> Linear::Float8WeightOperand() {
  const Parameter& p = ctx_.parameters[weight_];
  if (p.compute.data != nullptr && p.compute.dtype == DType::kF8E4M3) {
    return Float8Operand{{}, p.compute, p.compute_inverse_scale};
  }
  TITAN_ASSIGN_OR_RETURN(TensorView high, WeightOperand());
  return Float8Operand{high, {}, {}};
}

Float8Split Linear::Split() const {
  const bool row_parallel =
      weight_ < static_cast<int>(ctx_.row_parallel.size()) && ctx_.row_parallel[weight_];
  return {row_parallel, ctx_.tp.communicator(), ctx_.attention->sequence_group()};
}

absl::Status Linear::Forward(const TensorView& in, const TensorView& out, bool accumulate) {
  if (float8()) {
    TITAN_ASSIGN_OR_RETURN(Float8Operand w, Float8WeightOperand());
    return ctx_.float8->Forward(in, w, out, accumulate, Split());
  }
  TITAN_ASSIGN_OR_RETURN(TensorView w, WeightOperand());
  return ctx_.compute.Gemm(in, false, w, true, 1.0f, accumulate ? 1.0f : 0.0f, out);
}

absl::Status Linear::AddRowParallel(const TensorView& in, const TensorView& out) {
  const int64_t rows = in.shape[0], out_features = ctx_.parameters[weight_].value.shape[0];
  if (ctx_.tp.size() == 1) {
    return Forward(in, ModuleContext::Reshaped(out, {rows, out_features}), /*accumulate=*/true);
  }
  const TensorView full = ModuleContext::Reshaped(ctx_.scratch.tokens_full, {rows, out_features});
  TITAN_RETURN_IF_ERROR(Forward(in, full));
  const int64_t local = ctx_.n_local * out_features;
  TITAN_ASSIGN_OR_RETURN(
      const TensorView reduced,
      ctx_.tp.ReduceScatterTokens(ModuleContext::Reshaped(full, {rows * out_features}),
                                  ModuleContext::Reshaped(ctx_.scratch.tokens_local, {local})));
  return ctx_.compute.Accumulate(reduced, ModuleContext::Reshaped(out, {local}));
}

absl::Status Linear::Backward(const TensorView& dout, const TensorView& in,
                              const TensorView& dinp) {
  TITAN_ASSIGN_OR_RETURN(TensorView g, ctx_.Operand(dout, OperandScratch::kGrad));
  if (dinp.data != nullptr) {
    if (float8()) {
      TITAN_ASSIGN_OR_RETURN(Float8Operand w, Float8WeightOperand());
      TITAN_RETURN_IF_ERROR(ctx_.float8->InputGrad(g, w, dinp, Split()));
    } else {
      TITAN_ASSIGN_OR_RETURN(TensorView w, WeightOperand());
      TITAN_RETURN_IF_ERROR(ctx_.compute.Gemm(g, false, w, false, 1.0f, 1.0f, dinp));
    }
  }
  if (ctx_.deferring != nullptr) {
    WeightPass& pass = *ctx_.deferring;
    TITAN_ASSIGN_OR_RETURN(TensorView saved, pass.Keep(dout, weight_, /*input=*/false));
    TITAN_ASSIGN_OR_RETURN(TensorView kept_in, pass.Keep(in, weight_, /*input=*/true));
    pass.Add(DeferredGrad::kProjection, weight_, in.shape[0], saved, kept_in);
    return absl::OkStatus();
  }
  return AccumulateWeightGrad(g, in);
}

absl::Status Linear::BackwardOfPartialSums(const TensorView& dout, const TensorView& in,
                                           const TensorView& dinp, const TensorView& sum) {
  if (ctx_.tp.size() == 1) return Backward(dout, in, dinp);
  if (float8() || ctx_.deferring != nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "model: ", ctx_.parameters[weight_].name,
        " sums its gradient over the tensor-parallel ranks, which Float8 and the zero-bubble "
        "split do not do"));
  }
  TITAN_ASSIGN_OR_RETURN(TensorView g, ctx_.Operand(dout, OperandScratch::kGrad));
  TITAN_ASSIGN_OR_RETURN(TensorView w, WeightOperand());
  TITAN_RETURN_IF_ERROR(ctx_.compute.Gemm(g, false, w, false, 1.0f, 1.0f, dinp));
  TITAN_ASSIGN_OR_RETURN(TensorView x, ctx_.Operand(in, OperandScratch::kInput));
  const TensorView dw = ctx_.Grad(weight_);
  const TensorView summed = ModuleContext::Reshaped(sum, dw.shape);
  TITAN_RETURN_IF_ERROR(ctx_.compute.Gemm(g, true, x, false, 1.0f, 0.0f, summed));
  TITAN_RETURN_IF_ERROR(ctx_.tp.AllReduceSum(summed));
  return ctx_.compute.Accumulate(summed, dw);
}

absl::Status Linear::WeightGrad(const TensorView& dout, const TensorView& in) {
  TITAN_ASSIGN_OR_RETURN(TensorView g, ctx_.Operand(dout, OperandScratch::kGrad));
  return AccumulateWeightGrad(g, in);
}

absl::Status Linear::AccumulateWeightGrad(const TensorView& g, const TensorView& in) {
  TITAN_ASSIGN_OR_RETURN(TensorView x, ctx_.Operand(in, OperandScratch::kInput));
  const TensorView dw = ctx_.Grad(weight_);
  if (float8()) return ctx_.float8->WeightGrad(g, x, dw, Split());
  return ctx_.compute.Gemm(g, true, x, false, 1.0f, 1.0f, dw);
}

}  // namespace titan
