#include "plugins/checkpoint/safetensors/hf_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <tuple>

namespace titan::safetensors {
namespace {

TEST(HfLayout, MapsEveryLlamaParameterBothWays) {
  const std::pair<const char*, const char*> names[] = {
      {"tok_embeddings.weight", "model.embed_tokens.weight"},
      {"norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
      {"layers.0.attention.wq.weight", "model.layers.0.self_attn.q_proj.weight"},
      {"layers.1.attention.wk.weight", "model.layers.1.self_attn.k_proj.weight"},
      {"layers.2.attention.wv.weight", "model.layers.2.self_attn.v_proj.weight"},
      {"layers.3.attention.wo.weight", "model.layers.3.self_attn.o_proj.weight"},
      {"layers.4.feed_forward.w1.weight", "model.layers.4.mlp.gate_proj.weight"},
      {"layers.5.feed_forward.w2.weight", "model.layers.5.mlp.down_proj.weight"},
      {"layers.6.feed_forward.w3.weight", "model.layers.6.mlp.up_proj.weight"},
      {"layers.17.attention_norm.weight", "model.layers.17.input_layernorm.weight"},
      {"layers.125.ffn_norm.weight", "model.layers.125.post_attention_layernorm.weight"},
  };
  for (const auto& [titan, hf] : names) {
    EXPECT_EQ(*HfName(HfFamily::kLlama, titan), hf);
    EXPECT_EQ(*TitanName(HfFamily::kLlama, hf), titan);
  }
}

TEST(HfLayout, MapsEveryQwen3ParameterBothWays) {
  const std::pair<const char*, const char*> names[] = {
      {"layers.0.attention.q_norm.weight", "model.layers.0.self_attn.q_norm.weight"},
      {"layers.9.attention.k_norm.weight", "model.layers.9.self_attn.k_norm.weight"},
      {"layers.3.moe.router.gate.weight", "model.layers.3.mlp.gate.weight"},
  };
  for (const auto& [titan, hf] : names) {
    EXPECT_EQ(*HfName(HfFamily::kQwen3Moe, titan), hf);
    EXPECT_EQ(*TitanName(HfFamily::kQwen3Moe, hf), titan);
  }
  // Each expert's weights are one expert of titan's stack: w1 the gate, w3 up, w2 down.
  const std::tuple<const char*, int64_t, const char*> experts[] = {
      {"layers.2.moe.experts.w1", 0, "model.layers.2.mlp.experts.0.gate_proj.weight"},
      {"layers.2.moe.experts.w3", 7, "model.layers.2.mlp.experts.7.up_proj.weight"},
      {"layers.47.moe.experts.w2", 127, "model.layers.47.mlp.experts.127.down_proj.weight"},
  };
  for (const auto& [titan, expert, hf] : experts) {
    EXPECT_TRUE(IsStackedExperts(titan));
    EXPECT_EQ(*HfName(HfFamily::kQwen3Moe, titan, expert), hf);
    absl::StatusOr<TitanPlace> place = TitanPlaceOf(HfFamily::kQwen3Moe, hf);
    ASSERT_TRUE(place.ok()) << place.status();
    EXPECT_EQ(place->name, titan);
    EXPECT_EQ(place->expert, expert);
  }
  EXPECT_EQ(TitanPlaceOf(HfFamily::kQwen3Moe, "model.layers.2.mlp.gate_proj.weight")->expert, -1);
  EXPECT_FALSE(IsStackedExperts("layers.2.feed_forward.w1.weight"));
}

TEST(HfLayout, RefusesWhatHasNoHuggingFaceName) {
  const HfFamily moe = HfFamily::kQwen3Moe;
  EXPECT_TRUE(HasNoHfCounterpart(moe, "layers.4.moe.expert_bias"));
  EXPECT_FALSE(HasNoHfCounterpart(moe, "layers.4.moe.router.gate.weight"));
  EXPECT_THAT(std::string(HfName(moe, "layers.4.moe.expert_bias").status().message()),
              ::testing::HasSubstr("(the experts' load-balancing bias) has no Hugging Face "
                                   "counterpart"));
  EXPECT_THAT(std::string(HfName(moe, "layers.4.moe.experts.w1").status().message()),
              ::testing::HasSubstr("stacks every expert's weight"));
  EXPECT_FALSE(HfName(moe, "layers.4.attention.wq.weight", 2).ok());
  for (const char* hf :
       {"model.layers.0.mlp.experts.01.gate_proj.weight",
        "model.layers.0.mlp.experts.x.gate_proj.weight", "model.layers.0.mlp.experts.0.gate.weight",
        "model.layers.0.mlp.shared_expert.gate_proj.weight",
        "model.layers.0.mlp.shared_experts.gate_proj.weight",
        "model.layers.0.mlp.gate.e_score_correction_bias"}) {
    EXPECT_FALSE(TitanPlaceOf(moe, hf).ok()) << hf;
  }
}

TEST(HfLayout, RefusesNamesOutsideTheLlamaLayout) {
  for (const char* titan :
       {"layers.x.attention.wq.weight", "layers.01.ffn_norm.weight", "layers.-1.ffn_norm.weight",
        "layers.0.attention.wq.bias", "model.norm.weight", "output"}) {
    EXPECT_FALSE(HfName(HfFamily::kLlama, titan).ok()) << titan;
  }
  EXPECT_THAT(
      std::string(TitanName(HfFamily::kLlama, "model.layers.0.self_attn.rotary_emb.inv_freq")
                      .status()
                      .message()),
      ::testing::HasSubstr("'model.layers.0.self_attn.rotary_emb.inv_freq' is not a "
                           "Llama parameter in Hugging Face's naming"));
}

ModelShape Qwen3Shape(int64_t head_dim) {
  ModelShape shape;
  shape.family = HfFamily::kQwen3;
  shape.explicit_head_dim = head_dim;
  return shape;
}

// Llama's and Qwen3's wq and wk rows, and Qwen3's q_norm and k_norm elements, take the rotary
// permutation; nothing else moves or is scaled.
TEST(HfLayout, OnlyQueryAndKeyRowsAndQkNormElementsArePermuted) {
  const ModelShape qwen3 = Qwen3Shape(8);
  for (const char* name : {"layers.3.attention.wq.weight", "layers.3.attention.wk.weight"}) {
    const RowLayout layout = RowLayout::Of(qwen3, name);
    EXPECT_TRUE(layout.permutes() && !layout.permutes_elements() && !layout.scales()) << name;
    EXPECT_EQ(layout.ToHf(9), HfRow(9, 8)) << name;
  }
  for (const char* name :
       {"layers.0.attention.q_norm.weight", "model/layers.0.attention.k_norm.weight"}) {
    EXPECT_TRUE(RowLayout::Of(qwen3, name).permutes_elements()) << name;
  }
  for (const char* name : {"layers.3.attention.wv.weight", "layers.3.attention.wo.weight",
                           "tok_embeddings.weight", "layers.0.attention_norm.weight"}) {
    const RowLayout layout = RowLayout::Of(qwen3, name);
    EXPECT_FALSE(layout.permutes() || layout.scales()) << name;
    EXPECT_EQ(layout.ToHf(5), 5);
  }
  ModelShape llama = qwen3;
  llama.family = HfFamily::kLlama;
  EXPECT_FALSE(RowLayout::Of(llama, "layers.0.attention.q_norm.weight").permutes());
}

// Worked by hand from permute(w) = w.view(heads, head_dim/2, 2, dim).transpose(1, 2): HF's row
// (h, c, i) is titan's row (h, i, c). With head_dim 8, titan's pairs (0,1) (2,3) (4,5) (6,7)
// become HF's halves: first components 0 2 4 6, then second components 1 3 5 7.
TEST(HfLayout, RowPermutationMatchesTransformersConversion) {
  const int64_t head_dim = 8;
  const int64_t hf_rows_from_titan[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
  for (int64_t hf = 0; hf < 16; ++hf) {
    EXPECT_EQ(TitanRow(hf, head_dim), hf_rows_from_titan[hf]) << "HF row " << hf;
    EXPECT_EQ(HfRow(hf_rows_from_titan[hf], head_dim), hf) << "HF row " << hf;
  }
  // head_dim 2: one pair per head, nothing moves.
  for (int64_t row = 0; row < 6; ++row) EXPECT_EQ(HfRow(row, 2), row);
}

TEST(HfLayout, RowPermutationIsABijectionPerHead) {
  for (int64_t head_dim : {2, 4, 16, 128}) {
    std::set<int64_t> seen;
    for (int64_t row = 0; row < 3 * head_dim; ++row) {
      const int64_t hf = HfRow(row, head_dim);
      EXPECT_EQ(hf / head_dim, row / head_dim) << "rows stay within their head";
      EXPECT_EQ(TitanRow(hf, head_dim), row);
      seen.insert(hf);
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(3 * head_dim));
  }
}

// DeepSeek-V3's latent attention: transformers' modeling_deepseek_v3.py names, each expert's and
// the shared experts' weights, and the experts' bias as the router's e_score_correction_bias.
TEST(HfLayout, MapsEveryDeepseekV3ParameterBothWays) {
  const HfFamily deepseek = HfFamily::kDeepseekV3;
  const std::pair<const char*, const char*> names[] = {
      {"tok_embeddings.weight", "model.embed_tokens.weight"},
      {"output.weight", "lm_head.weight"},
      {"layers.0.attention.wq.weight", "model.layers.0.self_attn.q_proj.weight"},
      {"layers.1.attention.wq_a.weight", "model.layers.1.self_attn.q_a_proj.weight"},
      {"layers.1.attention.q_norm.weight", "model.layers.1.self_attn.q_a_layernorm.weight"},
      {"layers.1.attention.wq_b.weight", "model.layers.1.self_attn.q_b_proj.weight"},
      {"layers.2.attention.wkv_a.weight", "model.layers.2.self_attn.kv_a_proj_with_mqa.weight"},
      {"layers.2.attention.kv_norm.weight", "model.layers.2.self_attn.kv_a_layernorm.weight"},
      {"layers.2.attention.wkv_b.weight", "model.layers.2.self_attn.kv_b_proj.weight"},
      {"layers.2.attention.wo.weight", "model.layers.2.self_attn.o_proj.weight"},
      {"layers.0.feed_forward.w1.weight", "model.layers.0.mlp.gate_proj.weight"},
      {"layers.0.feed_forward.w2.weight", "model.layers.0.mlp.down_proj.weight"},
      {"layers.0.feed_forward.w3.weight", "model.layers.0.mlp.up_proj.weight"},
      {"layers.3.attention_norm.weight", "model.layers.3.input_layernorm.weight"},
      {"layers.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight"},
      {"layers.3.moe.router.gate.weight", "model.layers.3.mlp.gate.weight"},
      {"layers.3.moe.expert_bias", "model.layers.3.mlp.gate.e_score_correction_bias"},
      {"layers.3.moe.shared_experts.w1.weight",
       "model.layers.3.mlp.shared_experts.gate_proj.weight"},
      {"layers.3.moe.shared_experts.w2.weight",
       "model.layers.3.mlp.shared_experts.down_proj.weight"},
      {"layers.3.moe.shared_experts.w3.weight", "model.layers.3.mlp.shared_experts.up_proj.weight"},
  };
  for (const auto& [titan, hf] : names) {
    EXPECT_EQ(*HfName(deepseek, titan), hf);
    EXPECT_EQ(*TitanName(deepseek, hf), titan);
  }
  EXPECT_FALSE(HasNoHfCounterpart(deepseek, "layers.3.moe.expert_bias"));
  EXPECT_EQ(*HfName(deepseek, "layers.5.moe.experts.w2", 63),
            "model.layers.5.mlp.experts.63.down_proj.weight");
  EXPECT_EQ(TitanPlaceOf(deepseek, "model.layers.5.mlp.experts.63.up_proj.weight")->expert, 63);
  // Qwen3's QK-norm and Llama's k_proj are not DeepSeek-V3's.
  for (const char* hf :
       {"model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_proj.weight"}) {
    EXPECT_THAT(std::string(TitanPlaceOf(deepseek, hf).status().message()),
                ::testing::HasSubstr("is not a DeepSeek-V3 parameter in Hugging Face's naming"));
  }
}

ModelShape DeepseekShape(bool interleaved, double norm_eps) {
  ModelShape shape;
  shape.family = HfFamily::kDeepseekV3;
  shape.n_heads = 2, shape.qk_nope_head_dim = 4, shape.qk_rope_head_dim = 4;
  shape.explicit_head_dim = 8, shape.kv_lora_rank = 6, shape.q_lora_rank = 5;
  shape.rope_interleaved = interleaved, shape.norm_eps = norm_eps;
  return shape;
}

// rope_interleave true (titan's own order) moves nothing; false permutes the last
// qk_rope_head_dim rows of each query head and of kv_a_proj_with_mqa as a head of that size.
// With 2 heads of 4 + 4 and a latent of 6: titan's rotated pairs (4,5) (6,7) of head 0 are HF's
// halves 4 6 | 5 7.
TEST(HfLayout, DeepseekRotatedRowsArePermutedOnlyAsHalves) {
  const ModelShape interleaved = DeepseekShape(true, 1e-6);
  for (const char* name : {"layers.0.attention.wq.weight", "layers.0.attention.wq_b.weight",
                           "layers.0.attention.wkv_a.weight", "layers.0.attention.q_norm.weight"}) {
    const RowLayout layout = RowLayout::Of(interleaved, name);
    EXPECT_FALSE(layout.permutes() || layout.scales() || layout.permutes_elements()) << name;
  }
  const ModelShape halves = DeepseekShape(false, 1e-6);
  const int64_t hf_from_titan_q[16] = {0, 1, 2, 3, 4, 6, 5, 7, 8, 9, 10, 11, 12, 14, 13, 15};
  for (const char* name : {"layers.0.attention.wq.weight", "layers.1.attention.wq_b.weight"}) {
    const RowLayout layout = RowLayout::Of(halves, name);
    for (int64_t hf = 0; hf < 16; ++hf) {
      EXPECT_EQ(layout.ToTitan(hf), hf_from_titan_q[hf]) << name << " HF row " << hf;
      EXPECT_EQ(layout.ToHf(hf_from_titan_q[hf]), hf) << name << " HF row " << hf;
    }
  }
  const int64_t hf_from_titan_kv[10] = {0, 1, 2, 3, 4, 5, 6, 8, 7, 9};
  const RowLayout kv = RowLayout::Of(halves, "layers.0.attention.wkv_a.weight");
  for (int64_t hf = 0; hf < 10; ++hf) {
    EXPECT_EQ(kv.ToTitan(hf), hf_from_titan_kv[hf]) << "HF row " << hf;
    EXPECT_EQ(kv.ToHf(hf_from_titan_kv[hf]), hf) << "HF row " << hf;
  }
  EXPECT_FALSE(RowLayout::Of(halves, "layers.0.attention.wkv_b.weight").permutes());
}

// With norm_eps other than transformers' latent norms' 1e-6, q_a_proj's rows and the latent rows
// of kv_a_proj_with_mqa (not the rotary key's) are scaled by sqrt(1e-6 / norm_eps).
TEST(HfLayout, DeepseekRowsBeforeTheLatentNormsAreScaled) {
  const ModelShape shape = DeepseekShape(true, 1e-5);
  const double scale = std::sqrt(0.1);
  const RowLayout q_a = RowLayout::Of(shape, "layers.0.attention.wq_a.weight");
  EXPECT_TRUE(q_a.scales());
  EXPECT_DOUBLE_EQ(q_a.Scale(0), scale);
  EXPECT_DOUBLE_EQ(q_a.Scale(4), scale);
  const RowLayout kv_a = RowLayout::Of(shape, "layers.0.attention.wkv_a.weight");
  EXPECT_DOUBLE_EQ(kv_a.Scale(5), scale);
  EXPECT_EQ(kv_a.Scale(6), 1.0);  // the rotary key
  for (const char* name : {"layers.0.attention.wq_b.weight", "layers.0.attention.wkv_b.weight",
                           "layers.0.attention.q_norm.weight"}) {
    EXPECT_FALSE(RowLayout::Of(shape, name).scales()) << name;
  }
  EXPECT_FALSE(RowLayout::Of(DeepseekShape(true, 1e-6), "layers.0.attention.wq_a.weight").scales());
}

}  // namespace
}  // namespace titan::safetensors
