// The model's shape three ways: the checkpoint metadata titan passes ("model.dim", ...), the
// config.json of a Hugging Face LlamaForCausalLM, Qwen3ForCausalLM or Qwen3MoeForCausalLM, and
// the parameter shapes both imply.
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_CONFIG_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/checkpoint.h"
#include "titan/status.h"

namespace titan::safetensors {

// Written to config.json when the metadata has no model.max_seq_len: Llama 3's training context.
constexpr int64_t kDefaultMaxSeqLen = 8192;

// Which Hugging Face architecture a model is. The checkpoint metadata tells them apart by
// model.qk_norm (Qwen3's), model.experts (a mixture of experts: Qwen3-MoE's) and
// model.kv_lora_rank (latent attention: DeepSeek-V3's).
enum class HfFamily { kLlama, kQwen3, kQwen3Moe, kDeepseekV3 };

// The epsilon of transformers' DeepseekV3 q_a_layernorm and kv_a_layernorm, whatever
// rms_norm_eps says (DeepseekV3RMSNorm's default); titan's latent norms use norm_eps.
constexpr double kHfLatentNormEps = 1e-6;

struct ModelShape {
  HfFamily family = HfFamily::kLlama;
  int64_t dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, hidden_dim = 0;
  double norm_eps = 0, rope_theta = 0;
  bool rope_scaled = false;
  double rope_scale_factor = 0, rope_low_freq_factor = 0, rope_high_freq_factor = 0;
  int64_t rope_original_context = 0;
  int64_t max_seq_len = kDefaultMaxSeqLen;
  bool tie_embeddings = false;
  int64_t bos_token_id = -1, eos_token_id = -1;  // the tokenizer's; -1: unknown (null)
  // An imported config's; titan trains without dropout, and the core warns when it is not 0.
  double attention_dropout = 0;
  int64_t explicit_head_dim = 0;  // Qwen3's head_dim; 0: dim / n_heads
  // Qwen3-MoE: every layer from dense_layers on routes each token to experts_per_token of
  // `experts` SwiGLU experts of expert_hidden_dim features; the first dense_layers keep the dense
  // feed-forward of hidden_dim features (Hugging Face's mlp_only_layers).
  int64_t experts = 0, experts_per_token = 0, expert_hidden_dim = 0, dense_layers = 0;
  // DeepSeek-V3: multi-head latent attention (q_lora_rank 0: plain queries; head_dim() is
  // qk_nope_head_dim + qk_rope_head_dim), shared experts of shared_experts x expert_hidden_dim
  // features, sigmoid scores routed within expert_groups_chosen of expert_groups groups (with the
  // experts' bias, transformers' e_score_correction_bias), normalized when route_norm and scaled
  // by route_scale; YaRN RoPE over the rotated features (yarn_factor 1: off).
  int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0;
  int64_t v_head_dim = 0, shared_experts = 0, expert_groups = 1, expert_groups_chosen = 1;
  bool route_norm = true;
  double route_scale = 1;
  double yarn_factor = 1, yarn_original_seq_len = 4096, yarn_beta_fast = 32, yarn_beta_slow = 1;
  double yarn_mscale = 1;
  // How q_b_proj (q_proj) and kv_a_proj_with_mqa hold the rotated features: interleaved pairs
  // (x[2i], x[2i+1]) as titan and TorchTitan do (transformers' rope_interleave true, which titan
  // writes), or halves (x[i], x[i + qk_rope_head_dim / 2]), rope_interleave false.
  bool rope_interleaved = true;
  // An imported DeepSeek-V3's multi-token prediction layers (num_nextn_predict_layers), stored
  // after the model's as model.layers.<n_layers + i>.*: transformers leaves them out, as titan.
  int64_t prediction_layers = 0;

  int64_t head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : dim / n_heads; }
  bool qk_norm() const { return family == HfFamily::kQwen3 || family == HfFamily::kQwen3Moe; }
  bool latent_attention() const { return family == HfFamily::kDeepseekV3; }
  // Transformers' latent norms use kHfLatentNormEps, titan's norm_eps; since RMSNorm(s x, eps) =
  // RMSNorm(x, eps / s^2), Hugging Face's q_a_proj rows and the latent rows of
  // kv_a_proj_with_mqa are titan's times this factor, sqrt(kHfLatentNormEps / norm_eps): exactly
  // 1 when norm_eps is 1e-6 (DeepSeek-V3's own).
  double latent_scale() const;
  bool IsMoeLayer(int64_t layer) const { return experts > 0 && layer >= dense_layers; }
};

// From "model.dim" ... (checkpoint.h lists them). model.max_seq_len, model.tie_embeddings,
// model.bos_token_id, model.eos_token_id and the keys of other families than Llama (model.qk_norm,
// model.head_dim, model.experts, ...) may be absent; the rope factors are needed only when
// model.rope_scaled is "true", the experts' sizes only when model.experts is positive; a positive
// model.kv_lora_rank is DeepSeek-V3, which needs latent attention's, YaRN's and the router's keys
// (config.h's CheckpointMetadataOf). A model no Hugging Face layout titan writes holds (experts
// without QK-norm or latent attention, shared experts in Qwen3-MoE, a softmax DeepSeek router) is
// refused. Errors name the key and the value found.
absl::StatusOr<ModelShape> ModelShapeFromMetadata(const CheckpointMetadata& metadata);
CheckpointMetadata MetadataOf(const ModelShape& shape);

// config.json as transformers writes a LlamaForCausalLM (Qwen3ForCausalLM, Qwen3MoeForCausalLM,
// DeepseekV3ForCausalLM), with `dtype` as torch_dtype.
std::string HfConfigJson(const ModelShape& shape, DType dtype);
// Reads config.json (its text): model_type "llama" (or none), "qwen3", "qwen3_moe" or
// "deepseek_v3"; keys transformers' configs give defaults may be absent. What titan cannot compute
// (biases, sliding windows, unnormalized Qwen3-MoE expert weights, RoPE other than YaRN for
// DeepSeek-V3, ...) is an error naming the key. Errors name `path`.
absl::StatusOr<ModelShape> ModelShapeFromHfConfig(absl::string_view text, absl::string_view path);

// Every parameter's titan name (without "model/") and shape, the experts' bias
// (layers.N.moe.expert_bias, which HasNoHfCounterpart) included.
std::map<std::string, std::vector<int64_t>> ParameterShapes(const ModelShape& shape);

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_CONFIG_H_
