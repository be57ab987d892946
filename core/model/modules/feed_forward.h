// The SwiGLU feed-forward w2(silu(w1 x) * w3 x): column-parallel w1 and w3 into this rank's
// hidden features, the row-parallel w2 back into the residual stream.
#ifndef TITAN_CORE_MODEL_MODULES_FEED_FORWARD_H_
#define TITAN_CORE_MODEL_MODULES_FEED_FORWARD_H_

#include <vector>

#include "core/model/modules/activation_slot.h"
#include "core/model/modules/linear.h"

namespace titan {

struct FeedForwardActs {
  TensorView a, b;  // [n * hidden]: x . w1^T and x . w3^T, f32
  TensorView h;     // [n, hidden]: silu(a) * b, in the matmul dtype (w2's input)
};

class FeedForward {
 public:
  FeedForward(ModuleContext& context, int w1, int w2, int w3)
      : ctx_(context), w1_(context, w1), w2_(context, w2), w3_(context, w3) {}

  void ListActivations(FeedForwardActs& acts, std::vector<ActivationSlot>& slots) const;
  // w1, w3, w2 with their inputs: `normed` (the norm before, in the matmul dtype) and h.
  void ListProjections(const char* normed, BlockStage norm_stage,
                       std::vector<ProjectionInput>& projections) const;
  std::vector<int> weights() const { return {w1_.weight(), w2_.weight(), w3_.weight()}; }

  // Stage kGateUp: a and b from x [n, d] (a matmul operand).
  absl::Status GateUp(const TensorView& x, const FeedForwardActs& acts);
  // Stage kSwiGlu: h (a bf16 h computed in f32 in the idle d_h scratch, then rounded once).
  absl::Status SwiGlu(const FeedForwardActs& acts);
  // out [n_local, d] += the down projection (this rank's tokens, summed over tp ranks).
  absl::Status AddOutput(const FeedForwardActs& acts, const TensorView& out);
  // From d_out [n, d], the gradient of the output for every token: dx [n, d] += the gradient of
  // x (zeroed first), the weights' gradients accumulate.
  absl::Status Backward(const TensorView& d_out, const TensorView& x, const FeedForwardActs& acts,
                        const TensorView& dx);

 private:
  ModuleContext& ctx_;
  Linear w1_, w2_, w3_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_FEED_FORWARD_H_
