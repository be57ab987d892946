// The model's shape three ways: the checkpoint metadata titan passes ("model.dim", ...), the
// config.json of a Hugging Face LlamaForCausalLM, and the parameter shapes both imply.
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

struct ModelShape {
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

  int64_t head_dim() const { return dim / n_heads; }
};

// From "model.dim" ... (checkpoint.h lists them). model.max_seq_len, model.tie_embeddings,
// model.bos_token_id and model.eos_token_id may be absent; the rope factors are needed only when
// model.rope_scaled is "true". Errors name the key and the value found.
absl::StatusOr<ModelShape> ModelShapeFromMetadata(const CheckpointMetadata& metadata);
CheckpointMetadata MetadataOf(const ModelShape& shape);

// config.json as transformers writes a LlamaForCausalLM, with `dtype` as torch_dtype.
std::string HfConfigJson(const ModelShape& shape, DType dtype);
// Reads config.json (its text); keys transformers' LlamaConfig gives defaults may be absent.
// Errors name `path`.
absl::StatusOr<ModelShape> ModelShapeFromHfConfig(absl::string_view text, absl::string_view path);

// Every parameter's titan name (without "model/") and shape.
std::map<std::string, std::vector<int64_t>> ParameterShapes(const ModelShape& shape);

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_CONFIG_H_
