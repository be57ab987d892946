// DeepSeek-V3's config.json both ways: the keys transformers' DeepseekV3Config writes, its
// defaults for absent ones, transformers 4's rope_scaling and 5's rope_parameters, and what
// titan's latent attention and router cannot compute, named by key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plugins/checkpoint/safetensors/hf_config.h"

namespace titan::safetensors {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

// As config.h's CheckpointMetadataOf writes a small deepseek_v3 model, less the Llama 3 RoPE
// scaling keys (latent attention does not read them).
CheckpointMetadata DeepseekMetadata() {
  return {{"model.dim", "32"},
          {"model.n_layers", "3"},
          {"model.n_heads", "4"},
          {"model.n_kv_heads", "4"},
          {"model.vocab_size", "53"},
          {"model.hidden_dim", "40"},
          {"model.norm_eps", "1e-05"},
          {"model.rope_theta", "10000"},
          {"model.rope_scaled", "false"},
          {"model.max_seq_len", "163840"},
          {"model.tie_embeddings", "false"},
          {"model.head_dim", "16"},
          {"model.qk_norm", "false"},
          {"model.experts", "8"},
          {"model.experts_per_token", "3"},
          {"model.expert_hidden_dim", "24"},
          {"model.shared_experts", "2"},
          {"model.dense_layers", "1"},
          {"model.q_lora_rank", "16"},
          {"model.kv_lora_rank", "24"},
          {"model.qk_nope_head_dim", "8"},
          {"model.qk_rope_head_dim", "8"},
          {"model.v_head_dim", "6"},
          {"model.expert_groups", "4"},
          {"model.expert_groups_chosen", "2"},
          {"model.rope_yarn_factor", "40"},
          {"model.rope_yarn_original_seq_len", "4096"},
          {"model.rope_yarn_beta_fast", "32"},
          {"model.rope_yarn_beta_slow", "1"},
          {"model.rope_yarn_mscale", "0.7"},
          {"model.score_func", "sigmoid"},
          {"model.route_norm", "true"},
          {"model.route_scale", "2.5"}};
}

TEST(HfDeepseekConfig, WritesAndReadsTransformersDeepseekV3Config) {
  absl::StatusOr<ModelShape> shape = ModelShapeFromMetadata(DeepseekMetadata());
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->family, HfFamily::kDeepseekV3);
  const std::string json = HfConfigJson(*shape, DType::kBF16);
  const Json config = Json::parse(json);
  EXPECT_EQ(config["architectures"], Json::array({"DeepseekV3ForCausalLM"}));
  EXPECT_EQ(config["model_type"], "deepseek_v3");
  EXPECT_EQ(config["hidden_size"], 32);
  EXPECT_EQ(config["intermediate_size"], 40);
  EXPECT_EQ(config["num_key_value_heads"], 4);
  EXPECT_EQ(config["q_lora_rank"], 16);
  EXPECT_EQ(config["kv_lora_rank"], 24);
  EXPECT_EQ(config["qk_nope_head_dim"], 8);
  EXPECT_EQ(config["qk_rope_head_dim"], 8);
  EXPECT_EQ(config["head_dim"], 8);  // DeepseekV3Config's: the rotated features
  EXPECT_EQ(config["v_head_dim"], 6);
  EXPECT_EQ(config["n_routed_experts"], 8);
  EXPECT_EQ(config["num_experts_per_tok"], 3);
  EXPECT_EQ(config["moe_intermediate_size"], 24);
  EXPECT_EQ(config["n_shared_experts"], 2);
  EXPECT_EQ(config["first_k_dense_replace"], 1);
  EXPECT_EQ(config["n_group"], 4);
  EXPECT_EQ(config["topk_group"], 2);
  EXPECT_EQ(config["routed_scaling_factor"], 2.5);
  EXPECT_EQ(config["norm_topk_prob"], true);
  EXPECT_EQ(config["rope_interleave"], true);
  EXPECT_EQ(config["rms_norm_eps"], 1e-5);
  EXPECT_EQ(config["max_position_embeddings"], 163840);
  EXPECT_EQ(config["rope_scaling"], Json({{"rope_type", "yarn"},
                                          {"factor", 40.0},
                                          {"original_max_position_embeddings", 4096},
                                          {"beta_fast", 32.0},
                                          {"beta_slow", 1.0},
                                          {"mscale", 0.7},
                                          {"mscale_all_dim", 0.7},
                                          {"attention_factor", 1.0}}));
  EXPECT_FALSE(config.contains("mlp_bias"));
  absl::StatusOr<ModelShape> back = ModelShapeFromHfConfig(json, "config.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(MetadataOf(*back), DeepseekMetadata());
  auto shapes = ParameterShapes(*back);
  EXPECT_EQ(shapes.at("layers.0.attention.wq_a.weight"), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(shapes.at("layers.0.attention.wq_b.weight"), (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(shapes.at("layers.0.attention.wkv_a.weight"), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(shapes.at("layers.0.attention.wkv_b.weight"), (std::vector<int64_t>{56, 24}));
  EXPECT_EQ(shapes.at("layers.0.attention.wo.weight"), (std::vector<int64_t>{32, 24}));
  EXPECT_EQ(shapes.at("layers.0.feed_forward.w1.weight"), (std::vector<int64_t>{40, 32}));
  EXPECT_EQ(shapes.at("layers.1.moe.expert_bias"), (std::vector<int64_t>{8}));
  EXPECT_EQ(shapes.at("layers.1.moe.shared_experts.w2.weight"), (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(shapes.count("layers.0.attention.wq.weight"), 0u);
  EXPECT_EQ(shapes.count("layers.0.attention.wk.weight"), 0u);

  // Plain queries are q_lora_rank null; without YaRN, rope_scaling null and the run's context.
  CheckpointMetadata plain = DeepseekMetadata();
  plain["model.q_lora_rank"] = "0";
  plain["model.rope_yarn_factor"] = "1";
  plain["model.max_seq_len"] = "2048";
  shape = ModelShapeFromMetadata(plain);
  ASSERT_TRUE(shape.ok()) << shape.status();
  const Json plain_config = Json::parse(HfConfigJson(*shape, DType::kF32));
  EXPECT_TRUE(plain_config["q_lora_rank"].is_null());
  EXPECT_TRUE(plain_config["rope_scaling"].is_null());
  EXPECT_EQ(plain_config["max_position_embeddings"], 2048);
  back = ModelShapeFromHfConfig(plain_config.dump(), "config.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->q_lora_rank, 0);
  EXPECT_EQ(back->yarn_factor, 1.0);
  EXPECT_EQ(ParameterShapes(*back).at("layers.0.attention.wq.weight"),
            (std::vector<int64_t>{64, 32}));
}

// DeepseekV3Config's defaults (DeepSeek-V3's sizes) for absent keys, and transformers 5's
// rope_parameters in place of rope_theta and rope_scaling.
TEST(HfDeepseekConfig, ReadsDeepseekV3ConfigDefaultsAndRopeParameters) {
  absl::StatusOr<ModelShape> shape = ModelShapeFromHfConfig(
      R"({"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 4, "num_attention_heads": 2, "vocab_size": 50})",
      "c.json");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->q_lora_rank, 1536);
  EXPECT_EQ(shape->kv_lora_rank, 512);
  EXPECT_EQ(shape->head_dim(), 192);
  EXPECT_EQ(shape->v_head_dim, 128);
  EXPECT_EQ(shape->n_kv_heads, 2);
  EXPECT_EQ(shape->experts, 256);
  EXPECT_EQ(shape->experts_per_token, 8);
  EXPECT_EQ(shape->dense_layers, 3);
  EXPECT_EQ(shape->expert_groups, 8);
  EXPECT_EQ(shape->expert_groups_chosen, 4);
  EXPECT_EQ(shape->route_scale, 2.5);
  EXPECT_EQ(shape->norm_eps, 1e-6);
  EXPECT_EQ(shape->rope_theta, 10000.0);
  EXPECT_EQ(shape->yarn_factor, 1.0);
  EXPECT_TRUE(shape->rope_interleaved);

  shape = ModelShapeFromHfConfig(
      R"({"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 4, "num_attention_heads": 2, "vocab_size": 50,
          "first_k_dense_replace": 4, "max_position_embeddings": 8192, "rope_interleave": false,
          "rope_parameters": {"rope_theta": 50000.0, "rope_type": "yarn", "factor": 2.0,
                              "original_max_position_embeddings": 4096, "mscale": 1.0,
                              "mscale_all_dim": 1.0}})",
      "c.json");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->experts, 0);  // every layer dense
  EXPECT_EQ(shape->rope_theta, 50000.0);
  EXPECT_EQ(shape->yarn_factor, 2.0);
  EXPECT_EQ(shape->yarn_original_seq_len, 4096.0);
  EXPECT_EQ(shape->yarn_beta_fast, 32.0);
  EXPECT_EQ(shape->yarn_mscale, 1.0);
  EXPECT_FALSE(shape->rope_interleaved);
}

TEST(HfDeepseekConfig, RefusesWhatTitanCannotCompute) {
  const std::string ok =
      R"({"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 4, "num_attention_heads": 2, "vocab_size": 50,
          "max_position_embeddings": 163840,
          "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                           "mscale": 1.0, "mscale_all_dim": 1.0})";
  ASSERT_TRUE(ModelShapeFromHfConfig(ok + "}", "c.json").ok());
  auto error = [&](const std::string& extra) {
    return std::string(ModelShapeFromHfConfig(ok + extra + "}", "c.json").status().message());
  };
  EXPECT_THAT(error(R"(, "num_key_value_heads": 1)"),
              HasSubstr("\"num_key_value_heads\": latent attention makes a key and a value per "
                        "head, expected num_attention_heads = 2, found 1"));
  EXPECT_THAT(error(R"(, "head_dim": 192)"),
              HasSubstr("\"head_dim\": transformers' DeepseekV3 rotates head_dim features, which "
                        "are qk_rope_head_dim = 64, found 192"));
  EXPECT_THAT(error(R"(, "attention_bias": true)"),
              HasSubstr("\"attention_bias\": titan's latent attention has no biases"));
  EXPECT_THAT(error(R"(, "q_lora_rank": 0)"),
              HasSubstr("\"q_lora_rank\": expected a positive integer, or null for plain queries"));
  EXPECT_THAT(error(R"(, "scoring_func": "softmax")"),
              HasSubstr("\"scoring_func\": titan routes as transformers' DeepseekV3 does, "
                        "expected \"sigmoid\", found \"softmax\""));
  EXPECT_THAT(error(R"(, "topk_method": "greedy")"),
              HasSubstr("\"topk_method\": titan routes as transformers' DeepseekV3 does"));
  EXPECT_THAT(error(R"(, "quantization_config": {"quant_method": "fp8"})"),
              HasSubstr("\"quantization_config\": the weights are quantized"));
  EXPECT_THAT(error(R"(, "n_group": 3)"), HasSubstr("groups that divide the experts"));
  const std::string scaled =
      R"({"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 4, "num_attention_heads": 2, "vocab_size": 50,
          "max_position_embeddings": 163840, "rope_scaling": )";
  auto rope_error = [&](const std::string& rope) {
    return std::string(ModelShapeFromHfConfig(scaled + rope + "}", "c.json").status().message());
  };
  EXPECT_THAT(rope_error(R"({"rope_type": "yarn", "factor": 40,
                             "original_max_position_embeddings": 4096})"),
              HasSubstr("\"rope_scaling\": transformers would scale cos and sin by 1.36"));
  EXPECT_THAT(rope_error(R"({"rope_type": "yarn", "factor": 40, "mscale": 0.7,
                             "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096})"),
              HasSubstr("expected mscale = mscale_all_dim, found 0.7 and 1"));
  EXPECT_THAT(rope_error(R"({"rope_type": "yarn", "factor": 20, "mscale": 1, "mscale_all_dim": 1,
                             "original_max_position_embeddings": 4096})"),
              HasSubstr("max_position_embeddings / original_max_position_embeddings = 163840 / "
                        "4096 and its softmax scale from factor = 20"));
  EXPECT_THAT(rope_error(R"({"rope_type": "yarn", "factor": 40, "attention_factor": 1.0,
                             "truncate": false, "original_max_position_embeddings": 4096})"),
              HasSubstr("titan's YaRN truncates the correction range"));
  EXPECT_THAT(rope_error(R"({"rope_type": "linear", "factor": 2})"),
              HasSubstr("\"rope_scaling\": titan computes DeepSeek-V3's YaRN (rope_type \"yarn\") "
                        "or no scaling, found rope_type \"linear\""));
}

TEST(HfDeepseekConfig, RefusesMetadataTransformersCannotHold) {
  auto refused = [](const char* key, const char* value) {
    CheckpointMetadata metadata = DeepseekMetadata();
    metadata[key] = value;
    return std::string(ModelShapeFromMetadata(metadata).status().message());
  };
  EXPECT_THAT(refused("model.score_func", "softmax"),
              HasSubstr("'model.score_func' = softmax: transformers' DeepseekV3 scores the "
                        "experts by sigmoid"));
  EXPECT_THAT(refused("model.shared_experts", "0"),
              HasSubstr("'model.shared_experts' = 0: transformers' DeepseekV3MoE always has "
                        "shared experts"));
  EXPECT_THAT(refused("model.qk_norm", "true"), HasSubstr("'model.qk_norm' = true"));
  EXPECT_THAT(refused("model.rope_yarn_factor", "1.3"),
              HasSubstr("whose length times the factor is whole"));
  CheckpointMetadata metadata = DeepseekMetadata();
  metadata.erase("model.route_scale");
  EXPECT_THAT(std::string(ModelShapeFromMetadata(metadata).status().message()),
              HasSubstr("the checkpoint metadata lacks 'model.route_scale'"));
}

}  // namespace
}  // namespace titan::safetensors
