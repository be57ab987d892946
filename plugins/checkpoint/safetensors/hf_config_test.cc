#include "plugins/checkpoint/safetensors/hf_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace titan::safetensors {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

CheckpointMetadata Llama3Metadata() {
  return {{"model.dim", "4096"},
          {"model.n_layers", "32"},
          {"model.n_heads", "32"},
          {"model.n_kv_heads", "8"},
          {"model.vocab_size", "128256"},
          {"model.hidden_dim", "14336"},
          {"model.norm_eps", "1e-05"},
          {"model.rope_theta", "500000"},
          {"model.rope_scaled", "true"},
          {"model.rope_scale_factor", "8"},
          {"model.rope_low_freq_factor", "1"},
          {"model.rope_high_freq_factor", "4"},
          {"model.rope_original_context", "8192"},
          {"model.max_seq_len", "131072"},
          {"model.tie_embeddings", "false"},
          {"train.step", "10"}};
}

// What transformers writes for Llama 3.1 8B, to the keys titan reads.
TEST(HfConfig, WritesTransformersLlamaConfig) {
  absl::StatusOr<ModelShape> shape = ModelShapeFromMetadata(Llama3Metadata());
  ASSERT_TRUE(shape.ok()) << shape.status();
  const Json config = Json::parse(HfConfigJson(*shape, DType::kBF16));
  EXPECT_EQ(config["architectures"], Json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["hidden_size"], 4096);
  EXPECT_EQ(config["intermediate_size"], 14336);
  EXPECT_EQ(config["num_hidden_layers"], 32);
  EXPECT_EQ(config["num_attention_heads"], 32);
  EXPECT_EQ(config["num_key_value_heads"], 8);
  EXPECT_EQ(config["head_dim"], 128);
  EXPECT_EQ(config["vocab_size"], 128256);
  EXPECT_EQ(config["hidden_act"], "silu");
  EXPECT_EQ(config["rms_norm_eps"], 1e-5);
  EXPECT_EQ(config["rope_theta"], 500000.0);
  EXPECT_EQ(config["max_position_embeddings"], 131072);
  EXPECT_EQ(config["tie_word_embeddings"], false);
  EXPECT_EQ(config["torch_dtype"], "bfloat16");
  EXPECT_EQ(config["rope_scaling"], Json({{"rope_type", "llama3"},
                                          {"factor", 8.0},
                                          {"low_freq_factor", 1.0},
                                          {"high_freq_factor", 4.0},
                                          {"original_max_position_embeddings", 8192}}));
}

TEST(HfConfig, RoundTripsThroughConfigJson) {
  for (bool scaled : {true, false}) {
    CheckpointMetadata metadata = Llama3Metadata();
    metadata.erase("train.step");
    metadata["model.rope_scaled"] = scaled ? "true" : "false";
    metadata["model.norm_eps"] = "3.3e-06";
    if (!scaled) {
      for (const char* key : {"model.rope_scale_factor", "model.rope_low_freq_factor",
                              "model.rope_high_freq_factor", "model.rope_original_context"}) {
        metadata.erase(key);
      }
    }
    absl::StatusOr<ModelShape> shape = ModelShapeFromMetadata(metadata);
    ASSERT_TRUE(shape.ok()) << shape.status();
    const std::string json = HfConfigJson(*shape, DType::kF32);
    if (!scaled) {
      EXPECT_EQ(Json::parse(json)["rope_scaling"], nullptr);
    }
    absl::StatusOr<ModelShape> back = ModelShapeFromHfConfig(json, "config.json");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(MetadataOf(*back), metadata);
  }
}

TEST(HfConfig, NamesTheTokenizersBosAndEosIds) {
  CheckpointMetadata metadata = Llama3Metadata();
  metadata.erase("train.step");
  metadata["model.bos_token_id"] = "128000";
  metadata["model.eos_token_id"] = "128001";
  absl::StatusOr<ModelShape> shape = ModelShapeFromMetadata(metadata);
  ASSERT_TRUE(shape.ok()) << shape.status();
  const std::string json = HfConfigJson(*shape, DType::kBF16);
  EXPECT_EQ(Json::parse(json)["bos_token_id"], 128000);
  EXPECT_EQ(Json::parse(json)["eos_token_id"], 128001);
  absl::StatusOr<ModelShape> back = ModelShapeFromHfConfig(json, "config.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(MetadataOf(*back), metadata);

  // Unknown ids are named as null; Llama 3.1's list of eos ids reads as unknown.
  metadata.erase("model.bos_token_id");
  Json unknown = Json::parse(HfConfigJson(*ModelShapeFromMetadata(metadata), DType::kBF16));
  EXPECT_TRUE(unknown.contains("bos_token_id") && unknown["bos_token_id"].is_null());
  unknown["eos_token_id"] = {128001, 128008, 128009};
  back = ModelShapeFromHfConfig(unknown.dump(), "config.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->bos_token_id, -1);
  EXPECT_EQ(back->eos_token_id, -1);
}

TEST(HfConfig, MetadataErrorsNameTheKey) {
  CheckpointMetadata metadata = Llama3Metadata();
  metadata.erase("model.n_kv_heads");
  EXPECT_THAT(std::string(ModelShapeFromMetadata(metadata).status().message()),
              HasSubstr("the checkpoint metadata lacks 'model.n_kv_heads'"));
  metadata = Llama3Metadata();
  metadata["model.dim"] = "4096.5";
  EXPECT_THAT(std::string(ModelShapeFromMetadata(metadata).status().message()),
              HasSubstr("'model.dim': expected an integer, found '4096.5'"));
  metadata = Llama3Metadata();
  metadata["model.rope_scaled"] = "yes";
  EXPECT_THAT(std::string(ModelShapeFromMetadata(metadata).status().message()),
              HasSubstr("'model.rope_scaled': expected \"true\" or \"false\", found 'yes'"));
  metadata = Llama3Metadata();
  metadata["model.n_kv_heads"] = "5";
  EXPECT_THAT(std::string(ModelShapeFromMetadata(metadata).status().message()),
              HasSubstr("n_kv_heads to divide n_heads"));
  metadata = Llama3Metadata();
  metadata.erase("model.max_seq_len");
  EXPECT_EQ(ModelShapeFromMetadata(metadata)->max_seq_len, kDefaultMaxSeqLen);
}

TEST(HfConfig, ReadsTransformersDefaultsAndLegacyScaling) {
  // Llama 2 style: no kv heads (= heads), no rope_theta (10000), legacy "type" key.
  absl::StatusOr<ModelShape> shape = ModelShapeFromHfConfig(
      R"({"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
          "num_attention_heads": 4, "vocab_size": 50,
          "rope_scaling": {"type": "llama3", "factor": 2.0, "low_freq_factor": 1,
                           "high_freq_factor": 4, "original_max_position_embeddings": 64}})",
      "c.json");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->n_kv_heads, 4);
  EXPECT_EQ(shape->rope_theta, 10000.0);
  EXPECT_EQ(shape->norm_eps, 1e-6);
  EXPECT_EQ(shape->max_seq_len, 2048);
  EXPECT_TRUE(shape->rope_scaled);
  EXPECT_EQ(shape->rope_scale_factor, 2.0);
  EXPECT_FALSE(shape->tie_embeddings);
}

TEST(HfConfig, RefusesWhatTitanCannotRepresent) {
  const std::string base =
      R"("hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
         "num_attention_heads": 4, "vocab_size": 50)";
  auto error = [&](const std::string& extra) {
    return std::string(
        ModelShapeFromHfConfig("{" + base + extra + "}", "/m/config.json").status().message());
  };
  EXPECT_THAT(error(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4})"),
              HasSubstr("/m/config.json: \"rope_scaling\": titan computes Llama 3's scaling "
                        "(rope_type \"llama3\") or none, found rope_type \"yarn\""));
  EXPECT_THAT(error(R"(, "rope_scaling": {"rope_type": "llama3", "factor": 4})"),
              HasSubstr("\"rope_scaling\": expected a key \"low_freq_factor\""));
  EXPECT_THAT(error(R"(, "attention_bias": true)"), HasSubstr("titan's Llama has no biases"));
  EXPECT_THAT(error(R"(, "hidden_act": "gelu")"), HasSubstr("expected \"silu\", found \"gelu\""));
  EXPECT_THAT(error(R"(, "head_dim": 32)"),
              HasSubstr("hidden_size / num_attention_heads = 16, found 32"));
  EXPECT_THAT(error(R"(, "model_type": "mistral")"),
              HasSubstr("\"model_type\": expected \"llama\", found \"mistral\""));
  EXPECT_THAT(error(R"(, "num_key_value_heads": 3)"), HasSubstr("n_kv_heads to divide n_heads"));
  EXPECT_THAT(error(R"(, "vocab_size": "50")"),
              HasSubstr("\"vocab_size\": expected an integer, found \"50\""));
  EXPECT_THAT(std::string(ModelShapeFromHfConfig("{\"hidden_size\": 64}", "c").status().message()),
              HasSubstr("c: expected a key \"num_hidden_layers\""));
  EXPECT_THAT(std::string(ModelShapeFromHfConfig("{", "c").status().message()),
              HasSubstr("c: does not parse as JSON"));
}

TEST(HfConfig, ParameterShapesFollowTheModel) {
  ModelShape shape = *ModelShapeFromMetadata(Llama3Metadata());
  shape.n_layers = 1;
  auto shapes = ParameterShapes(shape);
  EXPECT_EQ(shapes.size(), 12u);  // embeddings, norm, output + 9 per layer
  EXPECT_EQ(shapes.at("layers.0.attention.wk.weight"), (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(shapes.at("layers.0.feed_forward.w2.weight"), (std::vector<int64_t>{4096, 14336}));
  shape.tie_embeddings = true;
  EXPECT_EQ(ParameterShapes(shape).count("output.weight"), 0u);
}

}  // namespace
}  // namespace titan::safetensors
