#include "plugins/checkpoint/safetensors/hf_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
    EXPECT_EQ(*HfName(titan), hf);
    EXPECT_EQ(*TitanName(hf), titan);
  }
}

TEST(HfLayout, MapsEveryQwen3ParameterBothWays) {
  const std::pair<const char*, const char*> names[] = {
      {"layers.0.attention.q_norm.weight", "model.layers.0.self_attn.q_norm.weight"},
      {"layers.9.attention.k_norm.weight", "model.layers.9.self_attn.k_norm.weight"},
      {"layers.3.moe.router.gate.weight", "model.layers.3.mlp.gate.weight"},
  };
  for (const auto& [titan, hf] : names) {
    EXPECT_EQ(*HfName(titan), hf);
    EXPECT_EQ(*TitanName(hf), titan);
  }
  // Each expert's weights are one expert of titan's stack: w1 the gate, w3 up, w2 down.
  const std::tuple<const char*, int64_t, const char*> experts[] = {
      {"layers.2.moe.experts.w1", 0, "model.layers.2.mlp.experts.0.gate_proj.weight"},
      {"layers.2.moe.experts.w3", 7, "model.layers.2.mlp.experts.7.up_proj.weight"},
      {"layers.47.moe.experts.w2", 127, "model.layers.47.mlp.experts.127.down_proj.weight"},
  };
  for (const auto& [titan, expert, hf] : experts) {
    EXPECT_TRUE(IsStackedExperts(titan));
    EXPECT_EQ(*HfName(titan, expert), hf);
    absl::StatusOr<TitanPlace> place = TitanPlaceOf(hf);
    ASSERT_TRUE(place.ok()) << place.status();
    EXPECT_EQ(place->name, titan);
    EXPECT_EQ(place->expert, expert);
  }
  EXPECT_EQ(TitanPlaceOf("model.layers.2.mlp.gate_proj.weight")->expert, -1);
  EXPECT_FALSE(IsStackedExperts("layers.2.feed_forward.w1.weight"));
}

TEST(HfLayout, RefusesWhatHasNoHuggingFaceName) {
  EXPECT_TRUE(HasNoHfCounterpart("layers.4.moe.expert_bias"));
  EXPECT_FALSE(HasNoHfCounterpart("layers.4.moe.router.gate.weight"));
  EXPECT_THAT(std::string(HfName("layers.4.moe.expert_bias").status().message()),
              ::testing::HasSubstr("(the experts' load-balancing bias) has no Hugging Face "
                                   "counterpart"));
  EXPECT_THAT(std::string(HfName("layers.4.moe.experts.w1").status().message()),
              ::testing::HasSubstr("stacks every expert's weight"));
  EXPECT_FALSE(HfName("layers.4.attention.wq.weight", 2).ok());
  for (const char* hf :
       {"model.layers.0.mlp.experts.01.gate_proj.weight",
        "model.layers.0.mlp.experts.x.gate_proj.weight", "model.layers.0.mlp.experts.0.gate.weight",
        "model.layers.0.mlp.shared_expert.gate_proj.weight"}) {
    EXPECT_FALSE(TitanPlaceOf(hf).ok()) << hf;
  }
}

TEST(HfLayout, OnlyQkNormElementsArePermuted) {
  EXPECT_TRUE(HasRotaryElements("layers.0.attention.q_norm.weight"));
  EXPECT_TRUE(HasRotaryElements("model/layers.0.attention.k_norm.weight"));
  EXPECT_FALSE(HasRotaryElements("layers.0.attention_norm.weight"));
  EXPECT_FALSE(HasRotaryRows("layers.0.attention.q_norm.weight"));
}

TEST(HfLayout, RefusesNamesOutsideTheLlamaLayout) {
  for (const char* titan :
       {"layers.x.attention.wq.weight", "layers.01.ffn_norm.weight", "layers.-1.ffn_norm.weight",
        "layers.0.attention.wq.bias", "model.norm.weight", "output"}) {
    EXPECT_FALSE(HfName(titan).ok()) << titan;
  }
  EXPECT_THAT(
      std::string(TitanName("model.layers.0.self_attn.rotary_emb.inv_freq").status().message()),
      ::testing::HasSubstr("'model.layers.0.self_attn.rotary_emb.inv_freq' is not a "
                           "Llama parameter in Hugging Face's naming"));
}

TEST(HfLayout, OnlyQueryAndKeyRowsArePermuted) {
  EXPECT_TRUE(HasRotaryRows("layers.3.attention.wq.weight"));
  EXPECT_TRUE(HasRotaryRows("layers.3.attention.wk.weight"));
  EXPECT_FALSE(HasRotaryRows("layers.3.attention.wv.weight"));
  EXPECT_FALSE(HasRotaryRows("layers.3.attention.wo.weight"));
  EXPECT_FALSE(HasRotaryRows("tok_embeddings.weight"));
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

}  // namespace
}  // namespace titan::safetensors
