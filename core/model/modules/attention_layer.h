// A block's attention branch (AttentionLayer): grouped-query self-attention
// (self_attention.h, Llama's and Qwen3's) or DeepSeek-V3's multi-head latent attention
// (latent_attention.h). Either runs its forward in the block's stages kQkv, kAttention and
// kAttentionOut and its backward from the gradient of its output.
#ifndef TITAN_CORE_MODEL_MODULES_ATTENTION_LAYER_H_
#define TITAN_CORE_MODEL_MODULES_ATTENTION_LAYER_H_

#include <vector>

#include "core/model/modules/activation_slot.h"
#include "core/model/modules/module_context.h"

namespace titan {

// Latent attention's own activations (empty in self-attention).
struct LatentActs {
  // Low-rank queries only: wq_a's output and its norm's rstd [n], the norm's output (wq_b's
  // input) [n, q_lora_rank].
  TensorView q_a, rstd_q, q_normed;
  // The key-value latent [n, kv_lora_rank] before and after kv_norm (wkv_b's input), rstd [n].
  TensorView c_kv, rstd_kv, kv_normed;
  TensorView att_v;  // [n, heads * v_head_dim]: the attention's output without padding (wo's input)
};

struct AttentionActs {
  TensorView q, k, v;  // [n * heads or kv_heads * head_dim], q and k rotated
  // QK-norm only: the projections before their norm, and the norms' rstd [n * heads or kv_heads].
  TensorView q_raw, k_raw, rstd_q, rstd_k;
  TensorView att;  // [n * heads * head_dim], f32
  TensorView lse;  // [batch * heads * seq_len]
  LatentActs latent;
};

class AttentionLayer {
 public:
  virtual ~AttentionLayer() = default;
  virtual void ListActivations(AttentionActs& acts, std::vector<ActivationSlot>& slots) const = 0;
  // The linear layers with their inputs: `normed` (the norm before, in the matmul dtype) and
  // the activations the layer keeps.
  virtual void ListProjections(const char* normed, BlockStage norm_stage,
                               std::vector<ProjectionInput>& projections) const = 0;
  // The linear layers' weights, in the order of the block's parameters.
  virtual std::vector<int> weights() const = 0;
  // The norms' weights inside the branch (QK-norm's, latent attention's q_norm and kv_norm).
  virtual std::vector<int> norm_weights() const = 0;
  // Stage kQkv: the rotated queries and keys and the values of x [n, d] (a matmul operand).
  virtual absl::Status Project(const TensorView& x, const AttentionActs& acts) = 0;
  // Stage kAttention: the attention's output and log-sum-exps.
  virtual absl::Status Attend(const AttentionActs& acts) = 0;
  // out [n_local, d] += the output projection (this rank's tokens, summed over tp ranks).
  virtual absl::Status AddOutput(const AttentionActs& acts, const TensorView& out) = 0;
  // From d_out [n, d], the gradient of the output for every token: dx [n, d] = the gradient of
  // x (zeroed first), the weights' gradients accumulate.
  virtual absl::Status Backward(const TensorView& d_out, const TensorView& x,
                                const AttentionActs& acts, const TensorView& dx) = 0;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_ATTENTION_LAYER_H_
