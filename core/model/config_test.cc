#include "core/model/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/model/model_family.h"

namespace titan {
namespace {

struct FlavorCase {
  const char* flavor;
  int64_t hidden_dim;
  int64_t parameters;  // the published counts
};

// Names each case by its flavor (test names stay the same from one build to the next).
void PrintTo(const FlavorCase& c, std::ostream* out) { *out << c.flavor; }

class FlavorTest : public testing::TestWithParam<FlavorCase> {};

TEST_P(FlavorTest, HiddenDimAndParameterCount) {
  auto config = LlamaFlavor(GetParam().flavor);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->Validate().ok());
  EXPECT_EQ(config->hidden_dim(), GetParam().hidden_dim);
  EXPECT_EQ(config->ParameterCount(), GetParam().parameters);
}

INSTANTIATE_TEST_SUITE_P(Llama3, FlavorTest,
                         testing::Values(FlavorCase{"debugmodel", 768, 6163712},
                                         // 6 layers x 2 x 256 x (256 - 64) fewer kv weights
                                         FlavorCase{"debugmodel_gqa", 768, 5573888},
                                         // 2048 x 256 output weights fewer
                                         FlavorCase{"debugmodel_tied", 768, 5639424},
                                         FlavorCase{"1B", 8192, 1235814400},
                                         FlavorCase{"3B", 8192, 3212749824},
                                         FlavorCase{"8B", 14336, 8030261248},
                                         FlavorCase{"70B", 28672, 70553706496},
                                         FlavorCase{"405B", 53248, 405853388800}));

TEST(ConfigTest, RejectsUnknownFlavorAndBadShapes) {
  auto unknown = LlamaFlavor("7B");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("found '7B'"), std::string::npos);
  LlamaConfig config;
  config.n_kv_heads = 3;
  EXPECT_FALSE(config.Validate().ok());
  config.n_kv_heads = 4;
  config.n_heads = 12;  // 256 / 12 is not whole
  EXPECT_FALSE(config.Validate().ok());
}

TEST(ConfigTest, SmallVariantsOfTheDebugModel) {
  EXPECT_EQ(LlamaFlavor("debugmodel_gqa")->n_kv_heads, 4);
  EXPECT_EQ(LlamaFlavor("debugmodel_gqa")->n_heads, 16);
  EXPECT_TRUE(LlamaFlavor("debugmodel_tied")->tie_embeddings);
  EXPECT_FALSE(LlamaFlavor("debugmodel")->tie_embeddings);
}

TEST(AdoptCheckpointModel, TakesNormEpsAndRopeFromTheCheckpoint) {
  LlamaConfig config = *LlamaFlavor("debugmodel");
  std::map<std::string, std::string> metadata = CheckpointMetadataOf(config, 128);
  // A Llama 2 style checkpoint: another theta and eps, no Llama 3 scaling.
  metadata["model.rope_theta"] = "10000";
  metadata["model.norm_eps"] = "1e-06";
  metadata["model.rope_scaled"] = "false";
  absl::StatusOr<std::vector<std::string>> adopted =
      AdoptCheckpointModel(metadata, "hf/llama", "debugmodel", config);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(config.rope.theta, 10000.0);
  EXPECT_EQ(config.norm_eps, 1e-6);
  EXPECT_FALSE(config.rope.scaled);
  EXPECT_EQ(*adopted, (std::vector<std::string>{"norm_eps = 1e-06 (the flavor's: 1e-05)",
                                                "rope_theta = 10000 (the flavor's: 500000)",
                                                "rope_scaled = false (the flavor's: true)"}));
  // The same values again: nothing to say.
  EXPECT_TRUE(AdoptCheckpointModel(metadata, "hf/llama", "debugmodel", config)->empty());

  // Scaling factors are taken when the checkpoint scales.
  LlamaConfig scaled = *LlamaFlavor("debugmodel");
  metadata = CheckpointMetadataOf(scaled, 128);
  metadata["model.rope_scale_factor"] = "32";
  ASSERT_TRUE(AdoptCheckpointModel(metadata, "hf/llama", "debugmodel", scaled).ok());
  EXPECT_EQ(scaled.rope.scale_factor, 32.0);
}

TEST(AdoptCheckpointModel, RefusesAnotherShapeNamingBothValues) {
  LlamaConfig config = *LlamaFlavor("debugmodel");
  std::map<std::string, std::string> metadata = CheckpointMetadataOf(config, 128);
  metadata["model.n_heads"] = "8";
  metadata["model.vocab_size"] = "4096";
  absl::StatusOr<std::vector<std::string>> adopted =
      AdoptCheckpointModel(metadata, "hf/llama", "debugmodel", config);
  EXPECT_EQ(adopted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(adopted.status().message(),
            "hf/llama holds another model: n_heads = 8, but model.flavor = \"debugmodel\" has 16; "
            "vocab_size = 4096, but the tokenizer's vocabulary has 2048. Choose the flavor (and "
            "tokenizer) it was trained with");

  // An untied checkpoint would lose its output weights in a tied model.
  LlamaConfig tied = *LlamaFlavor("debugmodel_tied");
  metadata = CheckpointMetadataOf(*LlamaFlavor("debugmodel"), 128);
  adopted = AdoptCheckpointModel(metadata, "step-10", "debugmodel_tied", tied);
  EXPECT_NE(adopted.status().message().find("separate output weights, but model.flavor = "
                                            "\"debugmodel_tied\" ties them"),
            std::string::npos)
      << adopted.status();
  // The reverse loads: the tied embeddings fill the untied output projection.
  LlamaConfig untied = *LlamaFlavor("debugmodel");
  EXPECT_TRUE(
      AdoptCheckpointModel(CheckpointMetadataOf(tied, 128), "x", "debugmodel", untied).ok());

  // A checkpoint with QK-norm (a Qwen3 of Llama's shape) would lose its norms; one with experts
  // says how many.
  LlamaConfig qwen3 = *LlamaFlavor("debugmodel");
  qwen3.qk_norm = true;
  adopted =
      AdoptCheckpointModel(CheckpointMetadataOf(qwen3, 128), "hf/qwen3", "debugmodel", untied);
  EXPECT_NE(adopted.status().message().find(
                "qk_norm = true, but model.flavor = \"debugmodel\" has false"),
            std::string::npos)
      << adopted.status();
  qwen3.qk_norm = false, qwen3.moe.experts = 8, qwen3.moe.top_k = 2, qwen3.moe.hidden_dim = 64;
  adopted = AdoptCheckpointModel(CheckpointMetadataOf(qwen3, 128), "x", "debugmodel", untied);
  EXPECT_NE(adopted.status().message().find("experts = 8, but model.flavor = \"debugmodel\" has 0"),
            std::string::npos)
      << adopted.status();
}

// Latent attention's shape is in the metadata (only a model with it writes its keys): a
// checkpoint of another latent shape, or without latent attention, is refused both ways; YaRN's
// settings are taken from the checkpoint as RoPE's are.
TEST(AdoptCheckpointModel, ComparesLatentAttentionAndTakesYarn) {
  const LlamaConfig llama = *LlamaFlavor("debugmodel");
  EXPECT_FALSE(CheckpointMetadataOf(llama, 128).contains("model.kv_lora_rank"));
  LlamaConfig deepseek = *DeepSeekV3Family().Flavor("debugmodel");
  std::map<std::string, std::string> metadata = CheckpointMetadataOf(deepseek, 128);
  EXPECT_EQ(metadata.at("model.kv_lora_rank"), "128");
  EXPECT_EQ(metadata.at("model.expert_groups"), "4");

  metadata["model.rope_yarn_factor"] = "20";
  absl::StatusOr<std::vector<std::string>> adopted =
      AdoptCheckpointModel(metadata, "step-10", "debugmodel", deepseek);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(*adopted, std::vector<std::string>{"rope_yarn_factor = 20 (the flavor's: 40)"});
  EXPECT_EQ(deepseek.yarn.factor, 20);

  metadata["model.v_head_dim"] = "16";
  adopted = AdoptCheckpointModel(metadata, "step-10", "debugmodel", deepseek);
  EXPECT_NE(
      adopted.status().message().find("v_head_dim = 16, but model.flavor = \"debugmodel\" has 32"),
      std::string::npos)
      << adopted.status();

  LlamaConfig into_llama = llama;
  adopted =
      AdoptCheckpointModel(CheckpointMetadataOf(deepseek, 128), "x", "debugmodel", into_llama);
  EXPECT_NE(adopted.status().message().find(
                "kv_lora_rank = 128, but model.flavor = \"debugmodel\" has 0"),
            std::string::npos)
      << adopted.status();
  std::map<std::string, std::string> llama_metadata = CheckpointMetadataOf(llama, 128);
  adopted = AdoptCheckpointModel(llama_metadata, "x", "debugmodel", deepseek);
  EXPECT_NE(adopted.status().message().find("no latent attention, but model.flavor = "
                                            "\"debugmodel\" has kv_lora_rank 128"),
            std::string::npos)
      << adopted.status();
}

// The router's rule is in a DeepSeek-V3 checkpoint's metadata, as TorchTitan names it; a
// checkpoint routed otherwise (other groups, scores, normalization or scale) is refused.
TEST(AdoptCheckpointModel, ComparesTheRoutersRule) {
  LlamaConfig deepseek = *DeepSeekV3Family().Flavor("debugmodel");
  const std::map<std::string, std::string> metadata = CheckpointMetadataOf(deepseek, 128);
  EXPECT_EQ(metadata.at("model.score_func"), "sigmoid");
  EXPECT_EQ(metadata.at("model.route_norm"), "true");
  EXPECT_EQ(metadata.at("model.route_scale"), "2.5");
  EXPECT_FALSE(CheckpointMetadataOf(*LlamaFlavor("debugmodel"), 128).contains("model.score_func"));
  const std::pair<const char*, const char*> others[] = {
      {"score_func", "score_func = softmax, but model.flavor = \"debugmodel\" has sigmoid"},
      {"route_norm", "route_norm = false, but model.flavor = \"debugmodel\" has true"},
      {"route_scale", "route_scale = 1, but model.flavor = \"debugmodel\" has 2.5"},
      {"expert_groups", "expert_groups = 1, but model.flavor = \"debugmodel\" has 4"},
      {"expert_groups_chosen",
       "expert_groups_chosen = 1, but model.flavor = \"debugmodel\" has 2"}};
  const std::map<std::string, std::string> values = {{"score_func", "softmax"},
                                                     {"route_norm", "false"},
                                                     {"route_scale", "1"},
                                                     {"expert_groups", "1"},
                                                     {"expert_groups_chosen", "1"}};
  for (const auto& [key, message] : others) {
    std::map<std::string, std::string> changed = metadata;
    changed[std::string("model.") + key] = values.at(key);
    LlamaConfig config = deepseek;
    absl::StatusOr<std::vector<std::string>> adopted =
        AdoptCheckpointModel(changed, "step-10", "debugmodel", config);
    EXPECT_THAT(std::string(adopted.status().message()), ::testing::HasSubstr(message)) << key;
  }
  EXPECT_TRUE(AdoptCheckpointModel(metadata, "step-10", "debugmodel", deepseek).ok());
}

TEST(ConfigTest, LatentAttentionShapesAndExpertGroupsAreChecked) {
  const LlamaConfig deepseek = *DeepSeekV3Family().Flavor("debugmodel");
  ASSERT_TRUE(deepseek.Validate().ok()) << deepseek.Validate();
  LlamaConfig wide_values = deepseek;
  wide_values.mla.v_head_dim = deepseek.mla.qk_head_dim() + 2;
  EXPECT_NE(wide_values.Validate().message().find("v_head_dim"), std::string::npos);
  LlamaConfig grouped_kv = deepseek;
  grouped_kv.n_kv_heads = deepseek.n_heads / 2;
  EXPECT_NE(grouped_kv.Validate().message().find("n_kv_heads = n_heads"), std::string::npos);
  LlamaConfig yarn_llama = *LlamaFlavor("debugmodel");
  yarn_llama.yarn.factor = 40;
  EXPECT_NE(yarn_llama.Validate().message().find("YaRN"), std::string::npos);
  LlamaConfig groups = deepseek;
  groups.moe.groups = 3;  // 8 experts
  EXPECT_NE(groups.Validate().message().find("groups 3"), std::string::npos);
  groups.moe.groups = 4, groups.moe.groups_chosen = 1;  // top 3 of 2 eligible experts
  EXPECT_NE(groups.Validate().message().find("groups chosen 1"), std::string::npos);
}

// Tensor parallelism does not split latent attention: refused with the way out.
TEST(ConfigTest, TensorParallelismRefusesLatentAttention) {
  const LlamaConfig deepseek = *DeepSeekV3Family().Flavor("debugmodel");
  const absl::Status status = CheckTensorParallelDegree(deepseek, 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(status.message().find("does not split multi-head latent attention"), std::string::npos)
      << status;
  EXPECT_TRUE(CheckTensorParallelDegree(deepseek, 1).ok());
}

}  // namespace
}  // namespace titan
