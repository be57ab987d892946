// The safetensors plugin with titan's deepseek_v3 family, on one rank: exports and imports in
// transformers' DeepSeek-V3 layout, the experts' bias as e_score_correction_bias, the rows before
// the latent norms scaled for their fixed epsilon, rope_interleave false's rows permuted, the
// multi-token prediction layers left out, and what the layout cannot hold.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/model/config.h"
#include "plugins/checkpoint/safetensors/hf_folder.h"
#include "plugins/checkpoint/safetensors/safetensors_test_util.h"

namespace titan::safetensors_testing {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

// The debug flavor made small (as deepseek_v3_reference_test's): low-rank or plain queries, a
// dense first layer, 8 experts in 4 groups, a shared expert, YaRN; norm_eps 1e-6 as DeepSeek's
// own unless given.
LlamaConfig SmallDeepseekConfig(int64_t q_lora_rank = 16, double norm_eps = 1e-6) {
  LlamaConfig config = *DeepSeekV3Family().Flavor("debugmodel");
  config.dim = 32, config.n_layers = 3, config.n_heads = 4, config.n_kv_heads = 4;
  config.vocab_size = 53, config.explicit_hidden_dim = 40, config.norm_eps = norm_eps;
  config.mla.q_lora_rank = q_lora_rank, config.mla.kv_lora_rank = 24;
  config.mla.qk_nope_head_dim = 8, config.mla.qk_rope_head_dim = 8, config.mla.v_head_dim = 6;
  config.explicit_head_dim = 16;
  MoeConfig& m = config.moe;
  m.experts = 8, m.top_k = 3, m.hidden_dim = 24, m.shared_experts = 1, m.dense_layers = 1;
  m.groups = 4, m.groups_chosen = 2;
  return config;
}

// Initialised from `seed`, with the experts' bias off zero.
std::unique_ptr<DecoderModel> SmallDeepseek(const LlamaConfig& config, uint64_t seed = 42) {
  auto model = SmallModel(config, seed, DeepSeekV3Family());
  const Arena& params = model->params();
  for (int i = 0; i < params.size(); ++i) {
    if (params.name(i).find("expert_bias") == std::string::npos) continue;
    float* bias = params.at(i).data<float>();
    for (int64_t j = 0; j < params.at(i).numel(); ++j) bias[j] = 0.01f * static_cast<float>(j + i);
  }
  return model;
}

const float* Titan(const DecoderModel& model, const std::string& name) {
  return model.params().Find(name)->data<float>();
}

class SafetensorsDeepseekTest : public SafetensorsTest {};

// With norm_eps 1e-6 nothing is scaled: export, import and export again give the same bytes, the
// experts' bias included (transformers' e_score_correction_bias); config.json is DeepseekV3Config.
TEST_F(SafetensorsDeepseekTest, ExportImportExportIsBitwise) {
  for (int64_t q_lora_rank : {16, 0}) {
    SCOPED_TRACE(q_lora_rank);
    const LlamaConfig config = SmallDeepseekConfig(q_lora_rank);
    auto model = SmallDeepseek(config);
    const CheckpointMetadata metadata = ModelMetadata(config);
    const fs::path a = dir_ / absl::StrCat("a", q_lora_rank),
                   b = dir_ / absl::StrCat("b", q_lora_rank);
    ASSERT_TRUE(Save(a.string(), ModelPieces(*model), metadata).ok());
    auto loaded = SmallDeepseek(config, /*seed=*/7);
    ASSERT_NE(ParameterBytes(*loaded), ParameterBytes(*model));
    absl::Status status = Load(a.string(), ModelPieces(*loaded));
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(ParameterBytes(*loaded), ParameterBytes(*model));
    ASSERT_TRUE(Save(b.string(), ModelPieces(*loaded), metadata).ok());
    for (const char* file : {"model.safetensors", "config.json"}) {
      EXPECT_EQ(ReadFile(b / file), ReadFile(a / file)) << file;
    }
    absl::StatusOr<CheckpointContents> contents = plugin_->Read(a.string());
    ASSERT_TRUE(contents.ok()) << contents.status();
    EXPECT_EQ(contents->tensors.size(), model->Parameters().size());
    LlamaConfig adopted_into = config;
    absl::StatusOr<std::vector<std::string>> adopted =
        AdoptCheckpointModel(contents->metadata, a.string(), "debugmodel", adopted_into);
    ASSERT_TRUE(adopted.ok()) << adopted.status();
    EXPECT_TRUE(adopted->empty());

    const Json json = Json::parse(ReadFile(a / "config.json"));
    EXPECT_EQ(json["architectures"], Json::array({"DeepseekV3ForCausalLM"}));
    EXPECT_EQ(json["model_type"], "deepseek_v3");
    EXPECT_EQ(json["q_lora_rank"], q_lora_rank > 0 ? Json(16) : Json(nullptr));
    EXPECT_EQ(json["kv_lora_rank"], 24);
    EXPECT_EQ(json["head_dim"], 8);
    EXPECT_EQ(json["n_routed_experts"], 8);
    EXPECT_EQ(json["n_shared_experts"], 1);
    EXPECT_EQ(json["first_k_dense_replace"], 1);
    EXPECT_EQ(json["n_group"], 4);
    EXPECT_EQ(json["topk_group"], 2);
    EXPECT_EQ(json["routed_scaling_factor"], 2.5);
    EXPECT_EQ(json["norm_topk_prob"], true);
    EXPECT_EQ(json["rope_interleave"], true);
    EXPECT_EQ(json["max_position_embeddings"], 40 * 4096);
    EXPECT_EQ(json["rope_scaling"]["rope_type"], "yarn");
    EXPECT_EQ(json["rope_scaling"]["mscale_all_dim"], 0.7);
    const StoredFile file(a / "model.safetensors");
    const float* bias = file.Find("model.layers.2.mlp.gate.e_score_correction_bias");
    ASSERT_TRUE(bias);
    EXPECT_EQ(0, std::memcmp(bias, Titan(*model, "layers.2.moe.expert_bias"), 8 * 4));
    EXPECT_EQ(0, std::memcmp(file.Find("model.layers.1.mlp.shared_experts.down_proj.weight"),
                             Titan(*model, "layers.1.moe.shared_experts.w2.weight"), 32 * 24 * 4));
    EXPECT_EQ(file.header().metadata.count(safetensors::kNotExportedKey), 0u);
  }
}

// norm_eps 1e-5: q_a_proj and the latent rows of kv_a_proj_with_mqa hold titan's values times
// sqrt(1e-6 / 1e-5), rounded once; the rotary key's rows and everything else as they are. The
// import divides, back to titan's values within one rounding.
TEST_F(SafetensorsDeepseekTest, ScalesTheRowsBeforeTheLatentNorms) {
  const LlamaConfig config = SmallDeepseekConfig(16, 1e-5);
  auto model = SmallDeepseek(config);
  ASSERT_TRUE(Save((dir_ / "s").string(), ModelPieces(*model), ModelMetadata(config)).ok());
  const StoredFile file(dir_ / "s" / "model.safetensors");
  const double scale = std::sqrt(0.1);
  const float* q_a = file.Find("model.layers.0.self_attn.q_a_proj.weight");
  const float* ours = Titan(*model, "layers.0.attention.wq_a.weight");
  for (int64_t i = 0; i < 16 * 32; ++i) {
    ASSERT_EQ(q_a[i], static_cast<float>(ours[i] * scale)) << i;
  }
  const float* kv_a = file.Find("model.layers.0.self_attn.kv_a_proj_with_mqa.weight");
  ours = Titan(*model, "layers.0.attention.wkv_a.weight");
  for (int64_t i = 0; i < (24 + 8) * 32; ++i) {
    ASSERT_EQ(kv_a[i], i < 24 * 32 ? static_cast<float>(ours[i] * scale) : ours[i]) << i;
  }
  EXPECT_EQ(0, std::memcmp(file.Find("model.layers.0.self_attn.q_b_proj.weight"),
                           Titan(*model, "layers.0.attention.wq_b.weight"), 64 * 16 * 4));

  auto loaded = SmallDeepseek(config, /*seed=*/7);
  ASSERT_TRUE(Load((dir_ / "s").string(), ModelPieces(*loaded)).ok());
  for (const Parameter& p : model->Parameters()) {
    const float* want = static_cast<const float*>(p.value.data);
    const float* got = Titan(*loaded, p.name);
    for (int64_t i = 0; i < p.value.numel(); ++i) {
      ASSERT_LE(std::fabs(got[i] - want[i]), std::fabs(want[i]) * 1.2e-7) << p.name << " " << i;
    }
  }
}

// rope_interleave false: q_b_proj's and kv_a_proj_with_mqa's rotated rows hold each pair's
// components as halves. Titan's rotated pair 0 of head 1 (q_b rows 16 + 8 + 0 and + 1) is HF's
// rows 24 and 28; the latent rows and the unrotated features stay.
TEST_F(SafetensorsDeepseekTest, ImportsRopeInterleaveFalseByPermutingTheRotatedRows) {
  const LlamaConfig config = SmallDeepseekConfig();
  auto model = SmallDeepseek(config);
  const fs::path folder = dir_ / "h";
  ASSERT_TRUE(Save(folder.string(), ModelPieces(*model), ModelMetadata(config)).ok());
  Json json = Json::parse(ReadFile(folder / "config.json"));
  json["rope_interleave"] = false;
  WriteFile(folder / "config.json", json.dump());
  auto loaded = SmallDeepseek(config, /*seed=*/7);
  ASSERT_TRUE(Load(folder.string(), ModelPieces(*loaded)).ok());
  const StoredFile file(folder / "model.safetensors");
  const float* q_b = file.Find("model.layers.0.self_attn.q_b_proj.weight");
  const float* wq_b = Titan(*loaded, "layers.0.attention.wq_b.weight");
  const int64_t row = 16;  // q_lora_rank columns
  for (auto [titan, hf] : {std::pair{24, 24}, std::pair{25, 28}, std::pair{26, 25},
                           std::pair{31, 31}, std::pair{16, 16}, std::pair{23, 23}}) {
    EXPECT_EQ(0, std::memcmp(wq_b + titan * row, q_b + hf * row, row * 4)) << titan;
  }
  const float* kv_a = file.Find("model.layers.0.self_attn.kv_a_proj_with_mqa.weight");
  const float* wkv_a = Titan(*loaded, "layers.0.attention.wkv_a.weight");
  for (auto [titan, hf] : {std::pair{0, 0}, std::pair{23, 23}, std::pair{24, 24}, std::pair{25, 28},
                           std::pair{30, 27}}) {
    EXPECT_EQ(0, std::memcmp(wkv_a + titan * 32, kv_a + hf * 32, 32 * 4)) << titan;
  }
  EXPECT_EQ(0, std::memcmp(Titan(*loaded, "layers.0.attention.wkv_b.weight"),
                           Titan(*model, "layers.0.attention.wkv_b.weight"), 4 * 14 * 24 * 4));
}

// DeepSeek-V3's published files carry a multi-token prediction layer after the model's
// (num_nextn_predict_layers): transformers leaves it out, and so does the import.
TEST_F(SafetensorsDeepseekTest, LeavesOutMultiTokenPredictionLayers) {
  const LlamaConfig config = SmallDeepseekConfig();
  auto model = SmallDeepseek(config);
  const fs::path folder = dir_ / "m";
  ASSERT_TRUE(Save(folder.string(), ModelPieces(*model), ModelMetadata(config)).ok());
  std::vector<float> extra(32, 1.0f);
  const std::vector<safetensors::TensorEntry> entries = {
      {"model.layers.3.enorm.weight", DType::kF32, {32}, 0, 0}};
  auto writer = safetensors::FileWriter::Create((folder / "mtp.safetensors").string(), entries, {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Append(extra.data(), extra.size() * 4).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  Json index = {{"weight_map", Json::object()}};
  const StoredFile stored(folder / "model.safetensors");
  for (const auto& t : stored.header().tensors) {
    index["weight_map"][t.name] = "model.safetensors";
  }
  index["weight_map"]["model.layers.3.enorm.weight"] = "mtp.safetensors";
  WriteFile(folder / "model.safetensors.index.json", index.dump());
  EXPECT_THAT(std::string(plugin_->Read(folder.string()).status().message()),
              HasSubstr("tensor 'model.layers.3.enorm.weight': 'model.layers.3.enorm.weight' is "
                        "not a DeepSeek-V3 parameter in Hugging Face's naming"));
  Json json = Json::parse(ReadFile(folder / "config.json"));
  json["num_nextn_predict_layers"] = 1;
  WriteFile(folder / "config.json", json.dump());
  absl::StatusOr<CheckpointContents> contents = plugin_->Read(folder.string());
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->tensors.size(), model->Parameters().size());
  auto loaded = SmallDeepseek(config, /*seed=*/7);
  ASSERT_TRUE(Load(folder.string(), ModelPieces(*loaded)).ok());
  EXPECT_EQ(ParameterBytes(*loaded), ParameterBytes(*model));
}

// What transformers' DeepseekV3 cannot hold is refused with the key that says so: a softmax
// router (the 16B flavor's), a model without the experts' bias.
TEST_F(SafetensorsDeepseekTest, RefusesWhatTransformersDeepseekV3CannotHold) {
  LlamaConfig config = SmallDeepseekConfig();
  auto model = SmallDeepseek(config);
  CheckpointMetadata metadata = ModelMetadata(config);
  metadata["model.score_func"] = "softmax";
  EXPECT_THAT(std::string(Save((dir_ / "x").string(), ModelPieces(*model), metadata).message()),
              HasSubstr("checkpoint metadata 'model.score_func' = softmax: transformers' "
                        "DeepseekV3 scores the experts by sigmoid"));
  std::vector<CheckpointPiece> without;
  for (const CheckpointPiece& piece : ModelPieces(*model)) {
    if (piece.name.find("expert_bias") == std::string::npos) without.push_back(piece);
  }
  EXPECT_THAT(std::string(Save((dir_ / "x").string(), without, ModelMetadata(config)).message()),
              HasSubstr("no rank holds 'model/layers.1.moe.expert_bias' [8]"));
  EXPECT_FALSE(fs::exists(dir_ / "x"));
}

// DeepSeek-V3's config.json as published (less quantization_config: its FP8 weights converted to
// bf16) describes titan's 671B flavor: importing it checks no size against another and takes
// only rms_norm_eps (titan's flavors keep TorchTitan's 1e-5); titan's export of the flavor writes
// the same values back.
TEST(HfDeepseekConfig, PublishedDeepseekV3ConfigIsThe671BFlavor) {
  const char* published = R"({
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": false,
    "attention_dropout": 0.0, "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1,
    "ep_size": 1, "first_k_dense_replace": 3, "hidden_act": "silu", "hidden_size": 7168,
    "initializer_range": 0.02, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256,
    "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                     "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                     "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
    "seq_aux": true, "tie_word_embeddings": false, "topk_group": 4, "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16", "transformers_version": "4.33.1", "use_cache": true,
    "v_head_dim": 128, "vocab_size": 129280})";
  absl::StatusOr<safetensors::ModelShape> shape =
      safetensors::ModelShapeFromHfConfig(published, "config.json");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->prediction_layers, 1);
  absl::StatusOr<LlamaConfig> flavor = DeepSeekV3Family().Flavor("671B");
  ASSERT_TRUE(flavor.ok()) << flavor.status();
  LlamaConfig config = *flavor;
  absl::StatusOr<std::vector<std::string>> adopted =
      AdoptCheckpointModel(safetensors::MetadataOf(*shape), "config.json", "671B", config);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(*adopted, std::vector<std::string>{"norm_eps = 1e-06 (the flavor's: 1e-05)"});
  const Json ours = Json::parse(safetensors::HfConfigJson(
      *safetensors::ModelShapeFromMetadata(CheckpointMetadataOf(config, 4096)), DType::kBF16));
  const Json theirs = Json::parse(published);
  for (const auto& [key, value] : ours.items()) {
    // The tokenizer's ids are unknown to titan; transformers' DeepseekV3Config derives head_dim
    // and qk_head_dim (not in DeepSeek's own config); rope_scaling compares by its values below.
    if (key == "bos_token_id" || key == "eos_token_id" || key == "head_dim" ||
        key == "qk_head_dim" || key == "rope_scaling" || key == "rope_interleave") {
      continue;
    }
    EXPECT_EQ(value, theirs.at(key)) << key;
  }
  for (const char* key : {"factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
                          "original_max_position_embeddings"}) {
    EXPECT_EQ(ours["rope_scaling"][key], theirs["rope_scaling"][key]) << key;
  }
}

}  // namespace
}  // namespace titan::safetensors_testing
