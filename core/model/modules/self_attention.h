// Grouped-query self-attention with RoPE: column-parallel projections wq, wk, wv into this
// rank's heads, the causal attention of the context's CausalAttention (the model's own or the
// cp plugin's), and the row-parallel projection wo back into the residual stream.
#ifndef TITAN_CORE_MODEL_MODULES_SELF_ATTENTION_H_
#define TITAN_CORE_MODEL_MODULES_SELF_ATTENTION_H_

#include <vector>

#include "core/model/modules/activation_slot.h"
#include "core/model/modules/linear.h"

namespace titan {

struct AttentionActs {
  TensorView q, k, v;  // [n * heads or kv_heads * head_dim], q and k rotated
  TensorView att;      // [n * heads * head_dim], f32
  TensorView lse;      // [batch * heads * seq_len]
};

class SelfAttention {
 public:
  SelfAttention(ModuleContext& context, int wq, int wk, int wv, int wo)
      : ctx_(context), wq_(context, wq), wk_(context, wk), wv_(context, wv), wo_(context, wo) {}

  void ListActivations(AttentionActs& acts, std::vector<ActivationSlot>& slots) const;
  // wq, wk, wv, wo with their inputs: `normed` (the norm before, in the matmul dtype) and the
  // attention's output.
  void ListProjections(const char* normed, BlockStage norm_stage,
                       std::vector<ProjectionInput>& projections) const;
  std::vector<int> weights() const {
    return {wq_.weight(), wk_.weight(), wv_.weight(), wo_.weight()};
  }

  // Stage kQkv: the rotated queries and keys and the values of x [n, d] (a matmul operand).
  absl::Status Project(const TensorView& x, const AttentionActs& acts);
  // Stage kAttention: the attention's output and log-sum-exps.
  absl::Status Attend(const AttentionActs& acts);
  // out [n_local, d] += the output projection (this rank's tokens, summed over tp ranks).
  absl::Status AddOutput(const AttentionActs& acts, const TensorView& out);
  // From d_out [n, d], the gradient of the output for every token: dx [n, d] += the gradient of
  // x (zeroed first), the weights' gradients accumulate.
  absl::Status Backward(const TensorView& d_out, const TensorView& x, const AttentionActs& acts,
                        const TensorView& dx);

 private:
  AttentionSpec Spec() const;

  ModuleContext& ctx_;
  Linear wq_, wk_, wv_, wo_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_SELF_ATTENTION_H_
