// A decoder model's shape: Llama 3's published flavors and derived sizes (feed-forward width,
// parameter count) that both the model and the tests rely on, and what other families (Qwen3)
// set apart from them: an explicit head size and feed-forward width, QK-norm, experts.
#ifndef TITAN_CORE_MODEL_CONFIG_H_
#define TITAN_CORE_MODEL_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/tensor/rope.h"
#include "titan/status.h"

namespace titan {

// A mixture-of-experts feed-forward (TorchTitan's MoEArgs): each token's top_k of `experts`
// routed experts, each a SwiGLU of `hidden_dim` features, plus `shared_experts` that see every
// token. experts = 0: every block has a dense feed-forward.
struct MoeConfig {
  int64_t experts = 0;
  int64_t top_k = 0;
  int64_t hidden_dim = 0;      // each expert's (moe_intermediate_size)
  int64_t shared_experts = 0;  // a SwiGLU of shared_experts * hidden_dim features
  int64_t dense_layers = 0;    // the first layers keep the dense feed-forward (DeepSeek-V3)
  // TorchTitan's TokenChoiceTopKRouter: softmax or sigmoid scores, weights normalized over the
  // chosen experts and scaled.
  bool sigmoid = false;
  bool normalize = true;
  double route_scale = 1.0;
  // Node-limited routing (DeepSeek-V3): the experts split into `groups` equal groups, and only
  // the `groups_chosen` groups of the highest top-2 score sums are eligible. 1, 1: off.
  int64_t groups = 1;
  int64_t groups_chosen = 1;
  // Load balance without an auxiliary loss: a bias on the scores that the choice (not the
  // weights) sees, moved after every step by coefficient x sign(mean load - expert's load).
  // 0: no bias.
  double load_balance_coeff = 0;
  // TorchTitan's debug.moe_force_load_balance: token t's j-th choice is expert (t k + j) mod
  // experts, every expert getting as many tokens; the weights are those experts' scores,
  // normalized and scaled as above. For debugging and tests only.
  bool force_balance = false;
  // DeepSeek-V3's complementary sequence-wise auxiliary loss, alpha x sum_i f_i P_i per sequence
  // (averaged over the sequences): f_i = experts / (top_k T) x the sequence's T tokens' choices
  // of expert i, P_i = the mean over them of expert i's score normalized over all experts. 0: off.
  double aux_loss_alpha = 0;

  bool enabled() const { return experts > 0; }
};

// DeepSeek-V3's multi-head latent attention (TorchTitan's deepseek_v3 Attention): the queries a
// plain projection wq (q_lora_rank 0) or low-rank (wq_a, RMSNorm, wq_b); keys and values from a
// latent of kv_lora_rank features (wkv_a, RMSNorm, wkv_b); each query and key head
// qk_nope_head_dim features without position plus qk_rope_head_dim rotated ones, the rotated key
// shared by every head; values of v_head_dim. kv_lora_rank = 0: no latent attention.
struct LatentAttentionConfig {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  bool enabled() const { return kv_lora_rank > 0; }
  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

// YaRN's RoPE frequencies as DeepSeek-V3 computes them (TorchTitan's rope scaling "yarn"):
// frequencies interpolated by `factor` below a ramp between the dimensions of beta_fast and
// beta_slow rotations over original_seq_len positions, and the attention's softmax scale times
// (0.1 mscale ln(factor) + 1)^2. factor <= 1: off. Only latent attention uses it.
struct YarnConfig {
  double factor = 1.0;
  double original_seq_len = 4096;
  double beta_fast = 32;
  double beta_slow = 1;
  double mscale = 1.0;

  bool enabled() const { return factor > 1.0; }
};

struct LlamaConfig {
  int64_t dim = 256;
  int64_t n_layers = 6;
  int64_t n_heads = 16;
  int64_t n_kv_heads = 16;
  int64_t vocab_size = 2048;
  int64_t multiple_of = 256;
  double ffn_dim_multiplier = 0;  // 0: not set
  double norm_eps = 1e-5;
  bool tie_embeddings = false;
  RopeConfig rope;
  // Set by families whose sizes are not Llama's derivations (0: derived).
  int64_t explicit_head_dim = 0;    // else dim / n_heads
  int64_t explicit_hidden_dim = 0;  // the dense feed-forward's, else Llama's rule below
  bool qk_norm = false;             // RMSNorm over each query and key head before RoPE (Qwen3)
  MoeConfig moe;
  LatentAttentionConfig mla;  // DeepSeek-V3 (head_dim() is then qk_head_dim)
  YarnConfig yarn;

  int64_t head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : dim / n_heads; }
  // explicit_hidden_dim, else int(8 * dim / 3), times ffn_dim_multiplier when set, rounded up to
  // multiple_of.
  int64_t hidden_dim() const;
  // Whether block `layer` has the mixture of experts (else the dense feed-forward).
  bool IsMoeLayer(int64_t layer) const { return moe.enabled() && layer >= moe.dense_layers; }
  int64_t ParameterCount() const;
  // What one token computes with: every parameter but the routed experts it is not sent to.
  int64_t ActiveParameterCount() const;
  // The attention's softmax scale over 1 / sqrt(head_dim()): YaRN's mscale squared, else 1.
  double SoftmaxScaleFactor() const;
  // Checks the shape is one the kernels can run: heads divide dim, kv heads divide heads, ...
  absl::Status Validate() const;
};

// The model's shape as the checkpoint metadata keys titan/checkpoint.h lists ("model.dim", ...),
// numbers written so that they read back exactly. A model with latent attention (DeepSeek-V3)
// adds its own: model.q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
// expert_groups, expert_groups_chosen, rope_yarn_{factor,original_seq_len,beta_fast,beta_slow,
// mscale}, and the router's rule as TorchTitan names it: score_func ("sigmoid" or "softmax"),
// route_norm ("true"/"false"), route_scale.
std::map<std::string, std::string> CheckpointMetadataOf(const LlamaConfig& config,
                                                        int64_t max_seq_len);

// Whether `config`'s heads, kv heads, feed-forward features and (when `vocab_known`) vocabulary
// divide among `degree` tensor-parallel ranks; an error names the model's numbers.
absl::Status CheckTensorParallelDegree(const LlamaConfig& config, int degree,
                                       bool vocab_known = true);

// debugmodel, debugmodel_gqa (4 kv heads for 16 heads), debugmodel_tied (tied embeddings), 1B,
// 3B, 8B, 70B, 405B (the last five with Llama 3's vocabulary of 128,256).
absl::StatusOr<LlamaConfig> LlamaFlavor(absl::string_view flavor);

// Matches `config` (of model.flavor `flavor`) to the model a checkpoint's metadata describes
// (CheckpointMetadataOf's keys; absent ones are not checked). A model of another shape (dim,
// n_layers, n_heads, n_kv_heads, hidden_dim, vocab_size, the experts' and latent attention's
// sizes, expert groups, the router's score_func, route_norm and route_scale, or separate output
// weights for a tied flavor) is an error naming `source` and both values. norm_eps and the RoPE
// settings are taken from the metadata; returns each that changed as "rope_theta = 10000 (the
// flavor's: 500000)".
absl::StatusOr<std::vector<std::string>> AdoptCheckpointModel(
    const std::map<std::string, std::string>& metadata, absl::string_view source,
    absl::string_view flavor, LlamaConfig& config);

}  // namespace titan

#endif  // TITAN_CORE_MODEL_CONFIG_H_
