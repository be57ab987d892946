#include "core/model/model_family.h"

#include <map>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace titan {
namespace {

using ::testing::HasSubstr;

TEST(ModelFamily, ARecipeNamesItsFamilyAndAnUnknownOneListsTheKnown) {
  absl::StatusOr<const ModelFamily*> llama = ModelFamilyNamed("llama3");
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ(*llama, &LlamaFamily());
  absl::StatusOr<const ModelFamily*> qwen3 = ModelFamilyNamed("qwen3");
  ASSERT_TRUE(qwen3.ok()) << qwen3.status();
  EXPECT_EQ(*qwen3, &Qwen3Family());
  const absl::Status unknown = ModelFamilyNamed("mamba").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.message(), HasSubstr("\"mamba\""));
  EXPECT_THAT(unknown.message(), HasSubstr("llama3, qwen3"));
}

TEST(ModelFamily, EachFamilyRefusesAFlavorItLacksListingItsOwn) {
  const absl::Status status = Qwen3Family().Flavor("405B").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("qwen3 has no flavor '405B'"));
  EXPECT_THAT(status.message(), HasSubstr("debugmodel_moe"));
  EXPECT_THAT(LlamaFamily().Flavor("30B-A3B").status().message(), HasSubstr("405B"));
  for (const ModelFamily* family : ModelFamilies()) {
    for (const std::string& flavor : family->flavors()) {
      absl::StatusOr<LlamaConfig> config = family->Flavor(flavor);
      ASSERT_TRUE(config.ok()) << family->name() << " " << flavor << ": " << config.status();
      EXPECT_TRUE(config->Validate().ok()) << family->name() << " " << flavor;
    }
  }
}

// The published sizes: Qwen3-30B-A3B has 30.5B parameters, 3.3B of them active per token (its
// model card); 0.6B and 8B count 0.6B and 8.2B.
TEST(ModelFamily, Qwen3FlavorsHaveThePublishedParameterCounts) {
  auto count = [](const char* flavor) { return Qwen3Family().Flavor(flavor)->ParameterCount(); };
  EXPECT_NEAR(count("30B-A3B") / 1e9, 30.5, 0.05);
  EXPECT_NEAR(Qwen3Family().Flavor("30B-A3B")->ActiveParameterCount() / 1e9, 3.3, 0.06);
  EXPECT_NEAR(count("0.6B") / 1e9, 0.6, 0.05);
  EXPECT_NEAR(count("8B") / 1e9, 8.2, 0.05);
  EXPECT_EQ(count("8B"), Qwen3Family().Flavor("8B")->ActiveParameterCount());
}

// DeepSeek-V3's published sizes: 671B parameters, 37B active per token (its technical report;
// the multi-token prediction module apart); the 16B (DeepSeek-V2-Lite's shape) 15.7B, 2.4B active
// (its count leaves out the embedding table, of which a token reads one row).
TEST(ModelFamily, DeepSeekV3FlavorsHaveThePublishedParameterCounts) {
  const LlamaConfig big = *DeepSeekV3Family().Flavor("671B");
  EXPECT_NEAR(big.ParameterCount() / 1e9, 671, 1);
  EXPECT_NEAR(big.ActiveParameterCount() / 1e9, 37, 0.7);
  const LlamaConfig small = *DeepSeekV3Family().Flavor("16B");
  EXPECT_NEAR(small.ParameterCount() / 1e9, 15.7, 0.1);
  EXPECT_NEAR((small.ActiveParameterCount() - small.vocab_size * small.dim) / 1e9, 2.4, 0.1);
}

// DeepSeek-V3's blocks under TorchTitan's names: latent attention with low-rank queries (q_norm
// over the query rank, kv_norm over the latent) or a plain wq, a dense first block, then experts;
// the declared parameters are those the config counts.
TEST(ModelFamily, DeepSeekV3DeclaresLatentAttentionUnderTorchTitansNames) {
  const LlamaConfig config = *DeepSeekV3Family().Flavor("debugmodel");
  const FamilyParameters family = DeepSeekV3Family().Declare(config, 1);
  std::map<std::string, std::vector<int64_t>> shapes;
  int64_t total = 0;
  for (const ParameterDecl& decl : InArenaOrder(family)) {
    shapes[decl.name] = decl.shape;
    int64_t numel = 1;
    for (int64_t extent : decl.shape) numel *= extent;
    if (!decl.buffer) total += numel;
  }
  EXPECT_EQ(total, config.ParameterCount());
  const LatentAttentionConfig& a = config.mla;
  const int64_t d = config.dim, h = config.n_heads;
  using Shape = std::vector<int64_t>;
  EXPECT_EQ(shapes["layers.0.attention.wq_a.weight"], (Shape{a.q_lora_rank, d}));
  EXPECT_EQ(shapes["layers.0.attention.q_norm.weight"], (Shape{a.q_lora_rank}));
  EXPECT_EQ(shapes["layers.0.attention.wq_b.weight"], (Shape{h * a.qk_head_dim(), a.q_lora_rank}));
  EXPECT_EQ(shapes["layers.0.attention.wkv_a.weight"],
            (Shape{a.kv_lora_rank + a.qk_rope_head_dim, d}));
  EXPECT_EQ(shapes["layers.0.attention.kv_norm.weight"], (Shape{a.kv_lora_rank}));
  EXPECT_EQ(shapes["layers.0.attention.wkv_b.weight"],
            (Shape{h * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank}));
  EXPECT_EQ(shapes["layers.0.attention.wo.weight"], (Shape{d, h * a.v_head_dim}));
  EXPECT_TRUE(shapes.contains("layers.0.feed_forward.w1.weight"));
  EXPECT_FALSE(shapes.contains("layers.0.moe.router.gate.weight"));
  EXPECT_TRUE(shapes.contains("layers.1.moe.shared_experts.w1.weight"));
  EXPECT_TRUE(shapes.contains("layers.1.moe.expert_bias"));
  EXPECT_FALSE(shapes.contains("layers.0.attention.wq.weight"));

  const LlamaConfig plain = *DeepSeekV3Family().Flavor("debugmodel_plain_q");
  std::set<std::string> names;
  for (const ParameterDecl& decl : InArenaOrder(DeepSeekV3Family().Declare(plain, 1))) {
    names.insert(decl.name);
  }
  EXPECT_TRUE(names.contains("layers.0.attention.wq.weight"));
  EXPECT_FALSE(names.contains("layers.0.attention.wq_a.weight"));
  EXPECT_FALSE(names.contains("layers.0.attention.q_norm.weight"));
}

// Qwen3's blocks: QK-norm weights of one head's size, and in the MoE flavors the router, the
// experts' bias (a buffer: zeros, no weight decay) and the experts' stacked weights.
TEST(ModelFamily, Qwen3DeclaresQkNormAndTheExperts) {
  LlamaConfig config = *Qwen3Family().Flavor("debugmodel_moe");
  config.n_layers = 2, config.moe.dense_layers = 1, config.moe.shared_experts = 2;
  const FamilyParameters family = Qwen3Family().Declare(config, 1);
  auto names = [](const std::vector<ParameterDecl>& block) {
    std::vector<std::string> out;
    for (const ParameterDecl& decl : block) out.push_back(decl.name);
    return out;
  };
  EXPECT_THAT(names(family.blocks[0]), testing::Contains("layers.0.feed_forward.w2.weight"));
  EXPECT_THAT(names(family.blocks[1]),
              testing::ElementsAre(
                  "layers.1.attention_norm.weight", "layers.1.attention.wq.weight",
                  "layers.1.attention.wk.weight", "layers.1.attention.wv.weight",
                  "layers.1.attention.wo.weight", "layers.1.attention.q_norm.weight",
                  "layers.1.attention.k_norm.weight", "layers.1.ffn_norm.weight",
                  "layers.1.moe.router.gate.weight", "layers.1.moe.expert_bias",
                  "layers.1.moe.experts.w1", "layers.1.moe.experts.w2", "layers.1.moe.experts.w3",
                  "layers.1.moe.shared_experts.w1.weight", "layers.1.moe.shared_experts.w2.weight",
                  "layers.1.moe.shared_experts.w3.weight"));
  const std::vector<ParameterDecl>& moe = family.blocks[1];
  EXPECT_EQ(moe[5].shape, std::vector<int64_t>({64}));        // q_norm: head_dim
  EXPECT_EQ(moe[1].shape, std::vector<int64_t>({512, 256}));  // wq: 8 heads of 64
  EXPECT_TRUE(moe[9].buffer);
  EXPECT_EQ(moe[9].init.kind, ParameterInit::Kind::kZeros);
  EXPECT_EQ(moe[10].shape, std::vector<int64_t>({8, 256, 256}));
  EXPECT_EQ(moe[11].shape, std::vector<int64_t>({8, 256, 256}));
  EXPECT_EQ(moe[13].shape, std::vector<int64_t>({512, 256}));  // 2 shared experts of 256
  config.moe.load_balance_coeff = 0;
  EXPECT_EQ(Qwen3Family().Declare(config, 1).blocks[1].size(), moe.size() - 1);
}

// Every parameter is declared once, with a tensor-parallel style, and its shape divides as the
// style says: on 2 tp ranks the split dimension halves, the others stay.
TEST(ModelFamily, LlamaDeclaresEveryParameterWithItsSplitAndItsInit) {
  LlamaConfig config;
  config.n_layers = 2;
  const std::vector<ParameterDecl> whole = InArenaOrder(LlamaFamily().Declare(config, 1));
  const std::vector<ParameterDecl> half = InArenaOrder(LlamaFamily().Declare(config, 2));
  ASSERT_EQ(whole.size(), 1u + 2 * 9 + 2);
  ASSERT_EQ(half.size(), whole.size());
  std::set<std::string> names;
  for (size_t i = 0; i < whole.size(); ++i) {
    const ParameterDecl& w = whole[i];
    EXPECT_TRUE(names.insert(w.name).second) << w.name;
    EXPECT_EQ(half[i].name, w.name);
    ASSERT_NE(w.tp_style, TensorParallelStyle::kUndeclared) << w.name;
    std::vector<int64_t> expected = w.shape;
    if (w.tp_style == TensorParallelStyle::kRowwise) expected[1] /= 2;
    if (w.tp_style == TensorParallelStyle::kColumnwise ||
        w.tp_style == TensorParallelStyle::kVocabParallelEmbedding) {
      expected[0] /= 2;
    }
    EXPECT_EQ(half[i].shape, expected) << w.name;
    // Norms start at one and are never a matmul operand; every matrix is drawn.
    const bool norm = w.shape.size() == 1;
    EXPECT_EQ(w.init.kind == ParameterInit::Kind::kOnes, norm) << w.name;
    EXPECT_EQ(w.matmul_weight, !norm && w.name != "tok_embeddings.weight") << w.name;
  }
  EXPECT_EQ(whole.front().name, "tok_embeddings.weight");
  EXPECT_EQ(whole.back().name, "output.weight");
  config.tie_embeddings = true;
  EXPECT_EQ(InArenaOrder(LlamaFamily().Declare(config, 1)).back().name, "norm.weight");
}

}  // namespace
}  // namespace titan
