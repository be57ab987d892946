// Grouped-query self-attention with RoPE: column-parallel projections wq, wk, wv into this
// rank's heads, optionally each query and key head RMS-normed before RoPE (Qwen3's QK-norm),
// the causal attention of the context's CausalAttention (the model's own or the
// cp plugin's), and the row-parallel projection wo back into the residual stream.
#ifndef TITAN_CORE_MODEL_MODULES_SELF_ATTENTION_H_
#define TITAN_CORE_MODEL_MODULES_SELF_ATTENTION_H_

#include <vector>

#include "core/model/modules/attention_layer.h"
#include "core/model/modules/linear.h"
#include "core/model/modules/rms_norm.h"

namespace titan {

// The attention's parameters, as indices into the context's parameters; q_norm and k_norm -1
// without QK-norm.
struct AttentionWeights {
  int wq, wk, wv, wo, q_norm = -1, k_norm = -1;
};

class SelfAttention : public AttentionLayer {
 public:
  SelfAttention(ModuleContext& context, const AttentionWeights& w)
      : ctx_(context),
        wq_(context, w.wq),
        wk_(context, w.wk),
        wv_(context, w.wv),
        wo_(context, w.wo),
        q_norm_(context, w.q_norm),
        k_norm_(context, w.k_norm) {}

  void ListActivations(AttentionActs& acts, std::vector<ActivationSlot>& slots) const override;
  // wq, wk, wv, wo with their inputs: `normed` (the norm before, in the matmul dtype) and the
  // attention's output.
  void ListProjections(const char* normed, BlockStage norm_stage,
                       std::vector<ProjectionInput>& projections) const override;
  std::vector<int> weights() const override {
    return {wq_.weight(), wk_.weight(), wv_.weight(), wo_.weight()};
  }
  // QK-norm's weights; none without.
  std::vector<int> norm_weights() const override {
    if (!qk_norm()) return {};
    return {q_norm_.weight(), k_norm_.weight()};
  }

  // Stage kQkv: the rotated queries and keys and the values of x [n, d] (a matmul operand).
  absl::Status Project(const TensorView& x, const AttentionActs& acts) override;
  // Stage kAttention: the attention's output and log-sum-exps.
  absl::Status Attend(const AttentionActs& acts) override;
  // out [n_local, d] += the output projection (this rank's tokens, summed over tp ranks).
  absl::Status AddOutput(const AttentionActs& acts, const TensorView& out) override;
  // From d_out [n, d], the gradient of the output for every token: dx [n, d] += the gradient of
  // x (zeroed first), the weights' gradients accumulate.
  absl::Status Backward(const TensorView& d_out, const TensorView& x, const AttentionActs& acts,
                        const TensorView& dx) override;

 private:
  AttentionSpec Spec() const;
  bool qk_norm() const { return q_norm_.weight() >= 0; }

  ModuleContext& ctx_;
  Linear wq_, wk_, wv_, wo_;
  HeadRmsNorm q_norm_, k_norm_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_SELF_ATTENTION_H_
