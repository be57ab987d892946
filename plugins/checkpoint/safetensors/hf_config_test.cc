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

// transformers 5 writes rope_parameters in place of rope_theta and rope_scaling, and Qwen3-MoE's
// num_local_experts in place of num_experts (as its save_pretrained does): read alike.
TEST(HfConfig, ReadsTransformers5sRopeParametersAndExpertCount) {
  absl::StatusOr<ModelShape> llama = ModelShapeFromHfConfig(
      R"({"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
          "num_attention_heads": 4, "vocab_size": 50,
          "rope_parameters": {"rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0,
                              "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 8192}})",
      "c.json");
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ(llama->rope_theta, 500000.0);
  EXPECT_TRUE(llama->rope_scaled);
  EXPECT_EQ(llama->rope_scale_factor, 8.0);
  EXPECT_EQ(llama->rope_original_context, 8192);
  absl::StatusOr<ModelShape> moe = ModelShapeFromHfConfig(
      R"({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 16, "vocab_size": 50, "num_local_experts": 4, "num_experts_per_tok": 2,
          "moe_intermediate_size": 32, "norm_topk_prob": true,
          "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}})",
      "c.json");
  ASSERT_TRUE(moe.ok()) << moe.status();
  EXPECT_EQ(moe->experts, 4);
  EXPECT_EQ(moe->rope_theta, 1000000.0);
  EXPECT_FALSE(moe->rope_scaled);
  EXPECT_THAT(std::string(ModelShapeFromHfConfig(
                              R"({"hidden_size": 64, "intermediate_size": 96,
                                  "num_hidden_layers": 2, "num_attention_heads": 4,
                                  "vocab_size": 50,
                                  "rope_parameters": {"rope_theta": 1e4, "rope_type": "yarn"}})",
                              "/m/config.json")
                              .status()
                              .message()),
              HasSubstr("/m/config.json: \"rope_parameters\": titan computes Llama 3's scaling "
                        "(rope_type \"llama3\") or none, found rope_type \"yarn\""));
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

// What CheckpointMetadataOf writes for a Qwen3 MoE of 4 layers, the first dense.
CheckpointMetadata Qwen3MoeMetadata() {
  CheckpointMetadata m = Llama3Metadata();
  m.erase("train.step");
  m["model.dim"] = "64", m["model.n_layers"] = "4", m["model.n_heads"] = "4";
  m["model.n_kv_heads"] = "2", m["model.vocab_size"] = "97", m["model.hidden_dim"] = "96";
  m["model.norm_eps"] = "1e-06", m["model.rope_theta"] = "1000000";
  m["model.rope_scaled"] = "false", m["model.max_seq_len"] = "256";
  for (const char* key : {"model.rope_scale_factor", "model.rope_low_freq_factor",
                          "model.rope_high_freq_factor", "model.rope_original_context"}) {
    m.erase(key);
  }
  m["model.qk_norm"] = "true", m["model.head_dim"] = "24", m["model.experts"] = "8";
  m["model.experts_per_token"] = "2", m["model.expert_hidden_dim"] = "32";
  m["model.shared_experts"] = "0", m["model.dense_layers"] = "1";
  return m;
}

TEST(HfConfig, WritesAndReadsTransformersQwen3MoeConfig) {
  absl::StatusOr<ModelShape> shape = ModelShapeFromMetadata(Qwen3MoeMetadata());
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->family, HfFamily::kQwen3Moe);
  const std::string json = HfConfigJson(*shape, DType::kBF16);
  const Json config = Json::parse(json);
  EXPECT_EQ(config["architectures"], Json::array({"Qwen3MoeForCausalLM"}));
  EXPECT_EQ(config["model_type"], "qwen3_moe");
  EXPECT_EQ(config["head_dim"], 24);
  EXPECT_EQ(config["intermediate_size"], 96);
  EXPECT_EQ(config["num_experts"], 8);
  EXPECT_EQ(config["num_experts_per_tok"], 2);
  EXPECT_EQ(config["moe_intermediate_size"], 32);
  EXPECT_EQ(config["norm_topk_prob"], true);
  EXPECT_EQ(config["decoder_sparse_step"], 1);
  EXPECT_EQ(config["mlp_only_layers"], Json::array({0}));
  EXPECT_EQ(config["use_sliding_window"], false);
  EXPECT_EQ(config["rope_theta"], 1e6);
  EXPECT_FALSE(config.contains("mlp_bias"));
  absl::StatusOr<ModelShape> back = ModelShapeFromHfConfig(json, "config.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(MetadataOf(*back), Qwen3MoeMetadata());

  // Dense Qwen3: no experts in config.json, the same keys in the metadata.
  CheckpointMetadata dense = Qwen3MoeMetadata();
  dense["model.experts"] = dense["model.experts_per_token"] = "0";
  dense["model.expert_hidden_dim"] = dense["model.dense_layers"] = "0";
  shape = ModelShapeFromMetadata(dense);
  ASSERT_TRUE(shape.ok()) << shape.status();
  const Json qwen3 = Json::parse(HfConfigJson(*shape, DType::kF32));
  EXPECT_EQ(qwen3["architectures"], Json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(qwen3["model_type"], "qwen3");
  EXPECT_FALSE(qwen3.contains("num_experts"));
  back = ModelShapeFromHfConfig(qwen3.dump(), "config.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(MetadataOf(*back), dense);
  auto shapes = ParameterShapes(*back);
  EXPECT_EQ(shapes.at("layers.0.attention.wq.weight"), (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(shapes.at("layers.0.attention.wo.weight"), (std::vector<int64_t>{64, 96}));
  EXPECT_EQ(shapes.at("layers.0.attention.q_norm.weight"), (std::vector<int64_t>{24}));
}

TEST(HfConfig, ParameterShapesOfQwen3Moe) {
  auto shapes = ParameterShapes(*ModelShapeFromMetadata(Qwen3MoeMetadata()));
  EXPECT_EQ(shapes.count("layers.0.feed_forward.w1.weight"), 1u);  // the dense first layer
  EXPECT_EQ(shapes.count("layers.0.moe.experts.w1"), 0u);
  EXPECT_EQ(shapes.at("layers.1.moe.router.gate.weight"), (std::vector<int64_t>{8, 64}));
  EXPECT_EQ(shapes.at("layers.1.moe.expert_bias"), (std::vector<int64_t>{8}));
  EXPECT_EQ(shapes.at("layers.1.moe.experts.w1"), (std::vector<int64_t>{8, 32, 64}));
  EXPECT_EQ(shapes.at("layers.1.moe.experts.w2"), (std::vector<int64_t>{8, 64, 32}));
  EXPECT_EQ(shapes.at("layers.3.moe.experts.w3"), (std::vector<int64_t>{8, 32, 64}));
  EXPECT_EQ(shapes.count("layers.1.feed_forward.w1.weight"), 0u);
}

// transformers' defaults for keys a Qwen3 config.json leaves out: 128-wide heads, 32 kv heads.
TEST(HfConfig, ReadsTransformersQwen3Defaults) {
  absl::StatusOr<ModelShape> shape = ModelShapeFromHfConfig(
      R"({"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 32, "vocab_size": 50})",
      "c.json");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->head_dim(), 128);
  EXPECT_EQ(shape->n_kv_heads, 32);
  EXPECT_EQ(shape->rope_theta, 10000.0);
  EXPECT_EQ(shape->max_seq_len, 32768);
  shape = ModelShapeFromHfConfig(
      R"({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 50,
          "norm_topk_prob": true})",
      "c.json");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->head_dim(), 16);
  EXPECT_EQ(shape->experts, 128);
  EXPECT_EQ(shape->experts_per_token, 8);
  EXPECT_EQ(shape->expert_hidden_dim, 768);
  EXPECT_EQ(shape->dense_layers, 0);
}

TEST(HfConfig, RefusesQwen3ConfigsTitanCannotRepresent) {
  const std::string base =
      R"("model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 96,
         "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 24, "vocab_size": 50, "num_experts": 4, "num_experts_per_tok": 2,
         "moe_intermediate_size": 32)";
  auto error = [&](const std::string& extra) {
    return std::string(
        ModelShapeFromHfConfig("{" + base + extra + "}", "/m/config.json").status().message());
  };
  EXPECT_THAT(error(""), HasSubstr("/m/config.json: \"norm_topk_prob\": titan's Qwen3-MoE "
                                   "normalizes the chosen experts' weights to sum to 1, expected "
                                   "true, found false (transformers' default when absent)"));
  EXPECT_THAT(error(R"(, "norm_topk_prob": false)"), HasSubstr("\"norm_topk_prob\""));
  const std::string ok = R"(, "norm_topk_prob": true)";
  EXPECT_EQ(error(ok), "");
  EXPECT_THAT(error(ok + R"(, "decoder_sparse_step": 2)"),
              HasSubstr("\"decoder_sparse_step\": titan's experts fill every layer after the "
                        "first dense ones, expected 1, found 2"));
  EXPECT_THAT(error(ok + R"(, "mlp_only_layers": [1])"),
              HasSubstr("\"mlp_only_layers\": titan keeps the dense feed-forward in the first "
                        "layers only, expected [] or [0, 1, ..., k - 1], found [1]"));
  EXPECT_EQ(ModelShapeFromHfConfig("{" + base + ok + R"(, "mlp_only_layers": [0, 1]})", "c")
                ->dense_layers,
            2);
  EXPECT_THAT(error(ok + R"(, "shared_expert_intermediate_size": 64)"),
              HasSubstr("\"shared_expert_intermediate_size\": titan's Qwen3-MoE has no shared "
                        "expert, found 64"));
  EXPECT_THAT(error(ok + R"(, "use_sliding_window": true)"),
              HasSubstr("\"use_sliding_window\": titan's Qwen3 attends to the whole context"));
  EXPECT_THAT(error(ok + R"(, "attention_bias": true)"),
              HasSubstr("\"attention_bias\": titan's Qwen3 has no biases, found true"));
  EXPECT_THAT(error(ok + R"(, "num_experts_per_tok": 5)"),
              HasSubstr("expected 1 <= experts per token <= experts"));
  EXPECT_THAT(error(ok + R"(, "head_dim": 23)"), HasSubstr("into even heads"));
  EXPECT_THAT(error(ok + R"(, "model_type": "qwen2_moe")"),
              HasSubstr("\"model_type\": expected \"llama\", found \"qwen2_moe\" (titan also "
                        "reads \"qwen3\", \"qwen3_moe\" and \"deepseek_v3\")"));
}

TEST(HfConfig, RefusesMetadataNoHuggingFaceLayoutHolds) {
  CheckpointMetadata m = Qwen3MoeMetadata();
  m["model.shared_experts"] = "2";
  EXPECT_THAT(std::string(ModelShapeFromMetadata(m).status().message()),
              HasSubstr("'model.shared_experts' = 2: Hugging Face's Qwen3-MoE has no shared "
                        "experts"));
  m = Qwen3MoeMetadata();
  m["model.qk_norm"] = "false";
  EXPECT_THAT(std::string(ModelShapeFromMetadata(m).status().message()),
              HasSubstr("'model.experts' = 8: titan exports a mixture of experts as Hugging "
                        "Face's Qwen3-MoE, which has QK-norm"));
  m = Llama3Metadata();
  m["model.head_dim"] = "64";
  EXPECT_THAT(std::string(ModelShapeFromMetadata(m).status().message()),
              HasSubstr("'model.head_dim' = 64: a Llama's heads are model.dim / model.n_heads = "
                        "128"));
  m["model.head_dim"] = "128", m["model.qk_norm"] = "false", m["model.experts"] = "0";
  ASSERT_TRUE(ModelShapeFromMetadata(m).ok());
  EXPECT_EQ(ModelShapeFromMetadata(m)->family, HfFamily::kLlama);
  m = Qwen3MoeMetadata();
  m.erase("model.expert_hidden_dim");
  EXPECT_THAT(std::string(ModelShapeFromMetadata(m).status().message()),
              HasSubstr("the checkpoint metadata lacks 'model.expert_hidden_dim'"));
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
