// A block's feed-forward branch (FeedForwardLayer): the dense SwiGLU feed-forward
// w2(silu(w1 x) * w3 x), column-parallel w1 and w3 into this rank's hidden features, the
// row-parallel w2 back into the residual stream; or a mixture of experts (moe_feed_forward.h).
#ifndef TITAN_CORE_MODEL_MODULES_FEED_FORWARD_H_
#define TITAN_CORE_MODEL_MODULES_FEED_FORWARD_H_

#include <vector>

#include "core/model/modules/activation_slot.h"
#include "core/model/modules/linear.h"

namespace titan {

// A mixture of experts' routed part, for n tokens each sent to k experts: m = n k assignments,
// grouped by expert.
struct RoutedActs {
  TensorView logits;   // [n, experts] f32: the router's
  TensorView experts;  // i32 [n, k]: each token's experts
  TensorView weights;  // [n, k] f32: and their weights
  TensorView slots;    // i32 [m]: where each assignment (token t, choice j) sits, t k + j
  TensorView counts;   // i32 [experts]: assignments per expert
  TensorView x;        // [m, d]: each assignment's token, in the matmul dtype
  // The rows this rank's experts compute: its own m assignments' (x), or under expert
  // parallelism the ep ranks' assignments to its experts, by source rank then expert (recv_x; at
  // most ep x m rows, M below).
  TensorView a, b;  // [M * expert hidden] f32: each row's expert's gate and up projections
  TensorView h;     // [M, expert hidden]: silu(a) * b, in the matmul dtype
  TensorView y;     // [m, d] f32: each assignment's expert's output
  // Expert parallelism only (empty without): the rows each ep rank sent to each of this rank's
  // experts, i32 [ep, local experts]; those rows [M, d] (matmul dtype) and their outputs (f32).
  TensorView recv_counts, recv_x, recv_y;
};

struct FeedForwardActs {
  TensorView a, b;    // [n * hidden]: x . w1^T and x . w3^T, f32
  TensorView h;       // [n, hidden]: silu(a) * b, in the matmul dtype (w2's input)
  RoutedActs routed;  // a mixture of experts' (its shared experts use a, b, h)
};

// What a block runs after its second norm: Forward in the stages kGateUp and kSwiGlu, then
// AddOutput; Backward from the gradient of its output.
class FeedForwardLayer {
 public:
  virtual ~FeedForwardLayer() = default;
  virtual void ListActivations(FeedForwardActs& acts, std::vector<ActivationSlot>& slots) const = 0;
  // The linear layers the zero-bubble weight pass computes the gradients of, with their inputs
  // (`normed`: the norm before, in the matmul dtype).
  virtual void ListProjections(const char* normed, BlockStage norm_stage,
                               std::vector<ProjectionInput>& projections) const = 0;
  // The linear layers' weights (those a Float8 recipe may convert).
  virtual std::vector<int> weights() const = 0;
  // A mixture of experts' routed experts' weights [experts, out, in] (grouped GEMMs, which a
  // rowwise Float8 recipe may convert); none in a dense feed-forward.
  virtual std::vector<int> expert_weights() const { return {}; }
  // Stage kGateUp, from x [n, d] (a matmul operand).
  virtual absl::Status GateUp(const TensorView& x, const FeedForwardActs& acts) = 0;
  // Stage kSwiGlu.
  virtual absl::Status SwiGlu(const FeedForwardActs& acts) = 0;
  // out [n_local, d] += the branch's output (this rank's tokens). Runs once per microbatch, never
  // to recompute.
  virtual absl::Status AddOutput(const FeedForwardActs& acts, const TensorView& out) = 0;
  // From d_out [n, d], the gradient of the output for every token: dx [n, d] = the gradient of
  // x (overwritten), the weights' gradients accumulate.
  virtual absl::Status Backward(const TensorView& d_out, const TensorView& x,
                                const FeedForwardActs& acts, const TensorView& dx) = 0;
};

class FeedForward : public FeedForwardLayer {
 public:
  // The block's own feed-forward (this rank's share of the config's hidden features), or a
  // mixture of experts' shared experts (`shared`: shared_experts x the expert hidden features,
  // its activations named apart).
  FeedForward(ModuleContext& context, int w1, int w2, int w3, bool shared = false);

  void ListActivations(FeedForwardActs& acts, std::vector<ActivationSlot>& slots) const override;
  // w1, w3, w2 with their inputs: `normed` and h.
  void ListProjections(const char* normed, BlockStage norm_stage,
                       std::vector<ProjectionInput>& projections) const override;
  std::vector<int> weights() const override { return {w1_.weight(), w2_.weight(), w3_.weight()}; }

  // a and b.
  absl::Status GateUp(const TensorView& x, const FeedForwardActs& acts) override;
  // h (a bf16 h computed in f32 in the idle d_h scratch, then rounded once).
  absl::Status SwiGlu(const FeedForwardActs& acts) override;
  // The down projection, summed over tp ranks.
  absl::Status AddOutput(const FeedForwardActs& acts, const TensorView& out) override;
  // full [n, d] += the down projection of every token, this rank's partial sum under tensor
  // parallelism (a mixture of experts sums its routed and shared experts' at once).
  absl::Status AddPartialOutput(const FeedForwardActs& acts, const TensorView& full);
  absl::Status Backward(const TensorView& d_out, const TensorView& x, const FeedForwardActs& acts,
                        const TensorView& dx) override;

 private:
  ModuleContext& ctx_;
  Linear w1_, w2_, w3_;
  // This rank's hidden features (the tensor-parallel degree is set after construction).
  int64_t hidden() const;
  bool shared_;
  const char *a_name_, *b_name_, *h_name_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_FEED_FORWARD_H_
