// DeepSeek-V3's multi-head latent attention (TorchTitan's deepseek_v3 Attention), on the compute
// interface's kernels as they are:
// - the queries wq x, or wq_b(q_norm(wq_a x)) (low rank), [n, heads, qk_head_dim];
// - wkv_a x = [c_kv | k_pe]: a latent of kv_lora_rank features and one rotary key of
//   qk_rope_head_dim features shared by every head; wkv_b(kv_norm(c_kv)) = per head
//   [k_nope | v];
// - each head's key [k_nope | k_pe], its value v padded with zeros to qk_head_dim so that the
//   attention kernel (one head size) runs it: the padded output columns are exactly zero and
//   are dropped before wo;
// - RoPE on the last qk_rope_head_dim features of every query and key head: one table over the
//   whole head whose first qk_nope_head_dim / 2 pairs rotate by zero (exactly the identity),
//   with YaRN's frequencies when the config asks for them;
// - the softmax scale 1 / sqrt(qk_head_dim) times YaRN's mscale^2, folded into the queries.
// Columns are split, joined and padded by transposes through the context's latent scratch.
// Tensor parallelism does not split it (CheckTensorParallelDegree refuses).
#ifndef TITAN_CORE_MODEL_MODULES_LATENT_ATTENTION_H_
#define TITAN_CORE_MODEL_MODULES_LATENT_ATTENTION_H_

#include <vector>

#include "core/model/modules/attention_layer.h"
#include "core/model/modules/linear.h"
#include "core/model/modules/rms_norm.h"

namespace titan {

// The parameters as indices into the context's parameters: wq alone (q_lora_rank 0), or wq_a,
// q_norm and wq_b; then wkv_a, kv_norm, wkv_b, wo.
struct LatentAttentionWeights {
  int wq = -1, wq_a = -1, q_norm = -1, wq_b = -1;
  int wkv_a = -1, kv_norm = -1, wkv_b = -1, wo = -1;
};

class LatentAttention : public AttentionLayer {
 public:
  LatentAttention(ModuleContext& context, const LatentAttentionWeights& w);

  // The widest per-token row the scratch holds: heads x max(qk_head_dim, qk_nope + v), the
  // latent with the rotary key, the query rank.
  static int64_t ScratchWidth(const LlamaConfig& config);
  // The RoPE table over a whole query or key head for positions position_offset ..: cos and sin
  // [len, qk_head_dim / 2], the unrotated pairs cos 1, sin 0, the rotated ones at
  // DeepSeek-V3's (YaRN) frequencies over qk_rope_head_dim. Computed on the host as PyTorch does
  // in f32, then copied to the device.
  static absl::Status RopeTable(const LlamaConfig& config, Compute& compute,
                                int64_t position_offset, const TensorView& cos,
                                const TensorView& sin);

  void ListActivations(AttentionActs& acts, std::vector<ActivationSlot>& slots) const override;
  void ListProjections(const char* normed, BlockStage norm_stage,
                       std::vector<ProjectionInput>& projections) const override;
  std::vector<int> weights() const override;
  std::vector<int> norm_weights() const override;
  absl::Status Project(const TensorView& x, const AttentionActs& acts) override;
  absl::Status Attend(const AttentionActs& acts) override;
  absl::Status AddOutput(const AttentionActs& acts, const TensorView& out) override;
  absl::Status Backward(const TensorView& d_out, const TensorView& x, const AttentionActs& acts,
                        const TensorView& dx) override;

 private:
  bool low_rank_q() const { return ctx_.config.mla.q_lora_rank > 0; }
  AttentionSpec Spec() const;
  // An f32 [rows, columns] view of `base`'s memory from element `offset` on.
  TensorView Matrix(const TensorView& base, int64_t offset, int64_t rows, int64_t columns) const;
  // dst [columns, rows] = src [rows, columns] transposed.
  absl::Status Transpose(const TensorView& src, int64_t rows, int64_t columns,
                         const TensorView& dst);

  ModuleContext& ctx_;
  Linear wq_, wq_a_, wq_b_, wkv_a_, wkv_b_, wo_;
  HeadRmsNorm q_norm_, kv_norm_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_LATENT_ATTENTION_H_
