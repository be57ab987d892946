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
// model.qk_norm (Qwen3's) and model.experts (a mixture of experts: Qwen3-MoE's).
enum class HfFamily { kLlama, kQwen3, kQwen3Moe };

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

  int64_t head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : dim / n_heads; }
  bool qk_norm() const { return family != HfFamily::kLlama; }
  bool IsMoeLayer(int64_t layer) const { return experts > 0 && layer >= dense_layers; }
};

// From "model.dim" ... (checkpoint.h lists them). model.max_seq_len, model.tie_embeddings,
// model.bos_token_id, model.eos_token_id and the keys of other families than Llama (model.qk_norm,
// model.head_dim, model.experts, ...) may be absent; the rope factors are needed only when
// model.rope_scaled is "true", the experts' sizes only when model.experts is positive. A model no
// Hugging Face layout titan writes holds (experts without QK-norm, shared experts) is refused.
// Errors name the key and the value found.
absl::StatusOr<ModelShape> ModelShapeFromMetadata(const CheckpointMetadata& metadata);
CheckpointMetadata MetadataOf(const ModelShape& shape);

// config.json as transformers writes a LlamaForCausalLM (Qwen3ForCausalLM, Qwen3MoeForCausalLM),
// with `dtype` as torch_dtype.
std::string HfConfigJson(const ModelShape& shape, DType dtype);
// Reads config.json (its text): model_type "llama" (or none), "qwen3" or "qwen3_moe"; keys
// transformers' configs give defaults may be absent. What titan cannot compute (biases, sliding
// windows, unnormalized expert weights, ...) is an error naming the key. Errors name `path`.
absl::StatusOr<ModelShape> ModelShapeFromHfConfig(absl::string_view text, absl::string_view path);

// Every parameter's titan name (without "model/") and shape, the experts' bias
// (layers.N.moe.expert_bias, which HasNoHfCounterpart) included.
std::map<std::string, std::vector<int64_t>> ParameterShapes(const ModelShape& shape);

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_CONFIG_H_
