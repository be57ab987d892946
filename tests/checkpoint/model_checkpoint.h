// A small Llama (or Qwen3) model as checkpoint plugins see it: its parameters as whole pieces named
// "model/<parameter>" and its shape as checkpoint metadata, for the checkpoint tests.
#ifndef TITAN_TESTS_CHECKPOINT_MODEL_CHECKPOINT_H_
#define TITAN_TESTS_CHECKPOINT_MODEL_CHECKPOINT_H_

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/model/decoder_model.h"
#include "titan/checkpoint.h"

namespace titan::checkpoint_testing {

// dim 64, 2 layers, 4 heads of 16, 2 kv heads, vocab 97; Llama 3 rope scaling with an original
// context of 32 so that short sequences meet all three frequency bands (kept, smoothed, scaled).
inline LlamaConfig SmallConfig(bool tied = false) {
  LlamaConfig config;
  config.dim = 64, config.n_layers = 2, config.n_heads = 4, config.n_kv_heads = 2;
  config.vocab_size = 97, config.multiple_of = 32, config.tie_embeddings = tied;
  config.norm_eps = 1e-5;
  config.rope.theta = 10000.0;
  config.rope.scaled = true;
  config.rope.scale_factor = 4.0;
  config.rope.low_freq_factor = 1.0;
  config.rope.high_freq_factor = 4.0;
  config.rope.original_context = 32.0;
  return config;
}

// A small Qwen3 (Qwen3Family): QK-norm, heads of 24 (not dim / n_heads = 16), an explicit
// feed-forward width, unscaled RoPE; with `experts`, a mixture of 4 experts (2 per token) with
// the load-balancing bias in every layer from `dense_layers` on.
inline LlamaConfig SmallQwen3Config(bool experts = false, int64_t dense_layers = 0) {
  LlamaConfig config;
  config.dim = 64, config.n_layers = experts ? 3 : 2, config.n_heads = 4, config.n_kv_heads = 2;
  config.explicit_head_dim = 24, config.explicit_hidden_dim = 96, config.vocab_size = 97;
  config.qk_norm = true, config.norm_eps = 1e-6;
  config.rope.theta = 1e6, config.rope.scaled = false;
  if (experts) {
    config.moe.experts = 4, config.moe.top_k = 2, config.moe.hidden_dim = 32;
    config.moe.dense_layers = dense_layers, config.moe.load_balance_coeff = 1e-3;
  }
  return config;
}

// Initialised from `seed`, with the norm weights moved off 1 so they are tested too, and wq, wk
// scaled up: with TorchTitan's small initial values attention is nearly uniform, and the logits
// would hardly depend on how the rotary embedding is laid out. A router's weights are scaled up
// too, so that the experts' scores are far apart and rounding never changes the choice.
inline std::unique_ptr<DecoderModel> SmallModel(const LlamaConfig& config, uint64_t seed = 42,
                                                const ModelFamily& family = LlamaFamily()) {
  std::unique_ptr<DecoderModel> model =
      std::move(DecoderModel::Create(config, {}, {}, {}, family)).value();
  EXPECT_TRUE(model->Initialize(seed).ok());
  const Arena& params = model->params();
  for (int i = 0; i < params.size(); ++i) {
    const std::string& name = params.name(i);
    float* w = params.at(i).data<float>();
    for (int64_t j = 0; j < params.at(i).numel(); ++j) {
      if (name.find("norm") != std::string::npos) w[j] = 1.0f + 0.1f * std::sin(j + i);
      if (name.find(".wq.") != std::string::npos || name.find(".wk.") != std::string::npos) {
        w[j] *= 8.0f;
      }
      if (name.find(".router.") != std::string::npos) w[j] *= 40.0f;
    }
  }
  return model;
}

// The metadata keys titan/checkpoint.h lists.
inline CheckpointMetadata ModelMetadata(const LlamaConfig& c, int64_t max_seq_len = 256) {
  return CheckpointMetadataOf(c, max_seq_len);
}

// One whole piece per parameter, viewing the model's own values.
inline std::vector<CheckpointPiece> ModelPieces(const DecoderModel& model) {
  std::vector<CheckpointPiece> pieces;
  for (const Parameter& p : model.Parameters()) {
    pieces.push_back(
        {"model/" + p.name, p.full_shape, std::vector<int64_t>(p.full_shape.size(), 0), p.value});
  }
  return pieces;
}

}  // namespace titan::checkpoint_testing

#endif  // TITAN_TESTS_CHECKPOINT_MODEL_CHECKPOINT_H_
