// DeepSeek-V3's part of hf_config: its checkpoint metadata (latent attention's, YaRN's and the
// router's keys), transformers' DeepseekV3Config in config.json, and its parameters' shapes.
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_DEEPSEEK_CONFIG_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_DEEPSEEK_CONFIG_H_

#include <map>
#include <string>
#include <vector>

#include "plugins/checkpoint/safetensors/hf_config.h"
#include "plugins/checkpoint/safetensors/hf_config_readers.h"

namespace titan::safetensors {

// The metadata of a model with latent attention, after the keys every family has: refuses what
// transformers' DeepseekV3 cannot hold (QK-norm, softmax scores, no shared experts).
absl::Status ReadDeepseekMetadata(MetadataReader& read, ModelShape& s);
void WriteDeepseekMetadata(const ModelShape& s, CheckpointMetadata& metadata);
absl::Status ValidateDeepseek(const ModelShape& s);

// `config` holds the keys every family writes; this makes it a DeepseekV3Config.
void WriteDeepseekConfig(const ModelShape& s, Json& config);
// A config.json of model_type "deepseek_v3", with DeepseekV3Config's defaults for absent keys.
absl::Status ReadDeepseekConfig(ConfigReader& config, ModelShape& s);

// Layer `layer`'s attention and feed-forward parameters, under titan's names (prefix "layers.N.").
void AddDeepseekLayerShapes(const ModelShape& s, int64_t layer, const std::string& prefix,
                            std::map<std::string, std::vector<int64_t>>& shapes);

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_DEEPSEEK_CONFIG_H_
