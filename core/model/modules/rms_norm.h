// RMSNorm over the residual stream (a replicated weight [d]). Under tensor parallelism with
// sequence parallel it norms this rank's tokens and gathers every token for the column-parallel
// projections that follow; its backward reduce-scatters their partial gradients back.
#ifndef TITAN_CORE_MODEL_MODULES_RMS_NORM_H_
#define TITAN_CORE_MODEL_MODULES_RMS_NORM_H_

#include "core/model/modules/module_context.h"

namespace titan {

class RmsNorm {
 public:
  RmsNorm(ModuleContext& context, int weight) : ctx_(context), weight_(weight) {}

  int weight() const { return weight_; }
  // The norm of this rank's tokens inp [n_local, d], gathered into out [n, d] (f32, or bf16:
  // normed and gathered in f32 in the idle d_norm_out scratch, then rounded once); rstd
  // [n_local] is saved for the backward. With `leave_gather`, under async tensor parallelism the
  // gather is left to the linear layer reading `out` next (ModuleContext::GatherTokens), which
  // the caller must follow with ModuleContext::FinishGather.
  absl::Status Forward(const TensorView& inp, const TensorView& out, const TensorView& rstd,
                       bool leave_gather = false);
  // d_inp [n_local, d] += the gradient through the norm of this rank's tokens, from d_out_full
  // [n, d] holding this rank's partial sums for every token. The weight's gradient adds up over
  // the tensor-parallel ranks (left for the weight pass while one is deferring).
  absl::Status Backward(const TensorView& d_out_full, const TensorView& inp, const TensorView& rstd,
                        const TensorView& d_inp);

 private:
  ModuleContext& ctx_;
  int weight_;
};

// RMSNorm over each head of a projection (Qwen3's QK-norm): rows of head_dim features with one
// weight [head_dim] for every head. The heads are this rank's, so under tensor parallelism the
// weight's gradient adds up over the ranks.
class HeadRmsNorm {
 public:
  HeadRmsNorm(ModuleContext& context, int weight) : ctx_(context), weight_(weight) {}

  int weight() const { return weight_; }
  // out [rows, head_dim] from inp [rows, head_dim], both f32; rstd [rows] saved.
  absl::Status Forward(const TensorView& inp, const TensorView& out, const TensorView& rstd);
  // d_inp [rows, head_dim] += the gradient through the norm from d_out.
  absl::Status Backward(const TensorView& d_out, const TensorView& inp, const TensorView& rstd,
                        const TensorView& d_inp);

 private:
  ModuleContext& ctx_;
  int weight_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_RMS_NORM_H_
