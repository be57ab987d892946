// The safetensors plugin with titan's qwen3 family, on one rank: Qwen3 and Qwen3-MoE exports and
// imports, each expert's tensors and the QK-norm weights in Hugging Face's layout, pieces of the
// experts' stacked weights, and what Hugging Face's layout cannot hold.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "core/model/config.h"
#include "plugins/checkpoint/safetensors/hf_config.h"
#include "plugins/checkpoint/safetensors/hf_folder.h"
#include "plugins/checkpoint/safetensors/hf_layout.h"
#include "plugins/checkpoint/safetensors/safetensors_file.h"
#include "plugins/checkpoint/safetensors/safetensors_test_util.h"

namespace titan::safetensors_testing {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

std::unique_ptr<DecoderModel> SmallQwen3(const LlamaConfig& config, uint64_t seed = 42) {
  return SmallModel(config, seed, Qwen3Family());
}

// Sets every element of the experts' bias to `value`.
void SetExpertBias(const DecoderModel& model, float value) {
  const Arena& params = model.params();
  for (int i = 0; i < params.size(); ++i) {
    if (params.name(i).find("expert_bias") == std::string::npos) continue;
    std::fill_n(params.at(i).data<float>(), params.at(i).numel(), value);
  }
}

class SafetensorsQwen3Test : public SafetensorsTest {
 protected:
  void ExpectRoundTripIsBitwise(const LlamaConfig& config) {
    const fs::path& dir = dir_;
    auto model = SmallQwen3(config);
    const CheckpointMetadata metadata = ModelMetadata(config);
    ASSERT_TRUE(plugin_->Save((dir / "a").string(), ModelPieces(*model), metadata, comm_).ok());
    auto loaded = SmallQwen3(config, /*seed=*/7);
    SetExpertBias(*loaded, 5.0f);  // an import sets it to zero, as the original's
    ASSERT_NE(ParameterBytes(*loaded), ParameterBytes(*model));
    std::vector<CheckpointPiece> pieces = ModelPieces(*loaded);
    absl::Status status = plugin_->Load((dir / "a").string(), pieces, comm_);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(ParameterBytes(*loaded), ParameterBytes(*model));
    ASSERT_TRUE(plugin_->Save((dir / "b").string(), ModelPieces(*loaded), metadata, comm_).ok());
    for (const char* file : {"model.safetensors", "config.json"}) {
      EXPECT_EQ(ReadFile(dir / "b" / file), ReadFile(dir / "a" / file)) << file;
    }
    absl::StatusOr<CheckpointContents> contents = plugin_->Read((dir / "a").string());
    ASSERT_TRUE(contents.ok()) << contents.status();
    ASSERT_EQ(contents->tensors.size(), model->Parameters().size());
    for (const Parameter& p : model->Parameters()) {
      auto it =
          std::find_if(contents->tensors.begin(), contents->tensors.end(),
                       [&](const CheckpointTensor& t) { return t.name == "model/" + p.name; });
      ASSERT_NE(it, contents->tensors.end()) << p.name;
      EXPECT_EQ(it->full_shape, p.full_shape) << p.name;
    }
    // What config.json implies is what titan wrote (numbers as numbers: 1e+06 is 1000000).
    for (const auto& [key, value] : metadata) {
      double ours, theirs;
      if (absl::SimpleAtod(value, &ours) && absl::SimpleAtod(contents->metadata[key], &theirs)) {
        EXPECT_EQ(theirs, ours) << key;
      } else {
        EXPECT_EQ(contents->metadata[key], value) << key;
      }
    }
  }
};

TEST_F(SafetensorsQwen3Test, Qwen3ExportImportExportIsBitwise) {
  const LlamaConfig config = SmallQwen3Config();
  ExpectRoundTripIsBitwise(config);
  const Json json = Json::parse(ReadFile(dir_ / "a" / "config.json"));
  EXPECT_EQ(json["architectures"], Json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(json["model_type"], "qwen3");
  EXPECT_EQ(json["head_dim"], 24);
  EXPECT_EQ(json["intermediate_size"], 96);
  EXPECT_EQ(json["rope_theta"], 1e6);
  EXPECT_EQ(json["rms_norm_eps"], 1e-6);
  EXPECT_FALSE(json.contains("num_experts"));
}

TEST_F(SafetensorsQwen3Test, Qwen3MoeExportImportExportIsBitwise) {
  const LlamaConfig config = SmallQwen3Config(/*experts=*/true, /*dense_layers=*/1);
  ExpectRoundTripIsBitwise(config);
  const Json json = Json::parse(ReadFile(dir_ / "a" / "config.json"));
  EXPECT_EQ(json["architectures"], Json::array({"Qwen3MoeForCausalLM"}));
  EXPECT_EQ(json["model_type"], "qwen3_moe");
  EXPECT_EQ(json["num_experts"], 4);
  EXPECT_EQ(json["num_experts_per_tok"], 2);
  EXPECT_EQ(json["moe_intermediate_size"], 32);
  EXPECT_EQ(json["norm_topk_prob"], true);
  EXPECT_EQ(json["decoder_sparse_step"], 1);
  EXPECT_EQ(json["mlp_only_layers"], Json::array({0}));
}

// Each expert's gate, up and down projections are titan's w1, w3 and w2 of that expert; q_norm
// and k_norm are permuted as a head's rows of q_proj; nothing else is in the file, and the
// experts' bias is not, which its __metadata__ says.
TEST_F(SafetensorsQwen3Test, StoresEachExpertAndQkNormInHuggingFaceOrder) {
  const LlamaConfig config = SmallQwen3Config(/*experts=*/true);
  auto model = SmallQwen3(config);
  SetExpertBias(*model, 0.25f);
  ASSERT_TRUE(Save((dir_ / "e").string(), ModelPieces(*model), ModelMetadata(config)).ok());
  const StoredFile file(dir_ / "e" / "model.safetensors");
  const int64_t d = config.dim, h = config.moe.hidden_dim, hd = config.head_dim();
  auto titan = [&](const std::string& name) { return model->params().Find(name)->data<float>(); };
  for (int64_t e = 0; e < config.moe.experts; ++e) {
    const std::string hf = absl::StrCat("model.layers.2.mlp.experts.", e, ".");
    ASSERT_TRUE(file.Find(hf + "gate_proj.weight")) << hf;
    EXPECT_EQ(0, std::memcmp(file.Find(hf + "gate_proj.weight"),
                             titan("layers.2.moe.experts.w1") + e * h * d, h * d * 4));
    EXPECT_EQ(0, std::memcmp(file.Find(hf + "up_proj.weight"),
                             titan("layers.2.moe.experts.w3") + e * h * d, h * d * 4));
    EXPECT_EQ(0, std::memcmp(file.Find(hf + "down_proj.weight"),
                             titan("layers.2.moe.experts.w2") + e * d * h, d * h * 4));
  }
  EXPECT_EQ(0, std::memcmp(file.Find("model.layers.2.mlp.gate.weight"),
                           titan("layers.2.moe.router.gate.weight"), config.moe.experts * d * 4));
  for (const char* norm : {"q_norm", "k_norm"}) {
    const float* stored = file.Find(absl::StrCat("model.layers.1.self_attn.", norm, ".weight"));
    const float* ours = titan(absl::StrCat("layers.1.attention.", norm, ".weight"));
    ASSERT_TRUE(stored) << norm;
    // Element 1 of HF's head is titan's element 2 (the first component of pair 1).
    EXPECT_EQ(stored[1], ours[2]) << norm;
    for (int64_t i = 0; i < hd; ++i) EXPECT_EQ(stored[i], ours[safetensors::TitanRow(i, hd)]);
  }
  // Per layer: 4 attention projections, 2 QK-norms, 2 norms, the router and 3 per expert.
  EXPECT_EQ(file.header().tensors.size(), 2 + 1 + 3 * (4 + 2 + 2 + 1 + 3 * 4));
  for (const auto& t : file.header().tensors) {
    EXPECT_TRUE(safetensors::TitanPlaceOf(safetensors::HfFamily::kQwen3Moe, t.name).ok()) << t.name;
    EXPECT_EQ(t.name.find("bias"), std::string::npos) << t.name;
  }
  EXPECT_THAT(file.header().metadata.at(safetensors::kNotExportedKey),
              HasSubstr("model/layers.N.moe.expert_bias of 3 layers"));
  // Pieces without the bias give the same tensors, and no note.
  std::vector<CheckpointPiece> without;
  for (const CheckpointPiece& piece : ModelPieces(*model)) {
    if (piece.name.find("expert_bias") == std::string::npos) without.push_back(piece);
  }
  ASSERT_TRUE(Save((dir_ / "w").string(), without, ModelMetadata(config)).ok());
  const StoredFile other(dir_ / "w" / "model.safetensors");
  EXPECT_EQ(other.header().metadata.count(safetensors::kNotExportedKey), 0u);
  ASSERT_EQ(other.header().tensors.size(), file.header().tensors.size());
  for (const auto& t : file.header().tensors) {
    ASSERT_TRUE(other.Find(t.name)) << t.name;
    EXPECT_EQ(0, std::memcmp(other.Find(t.name), file.Find(t.name), t.end - t.begin)) << t.name;
  }
}

// The stacked experts split by experts and by columns, and the QK-norm weights by elements, give
// the same file as whole pieces; a load fills just a piece's rectangle of them.
TEST_F(SafetensorsQwen3Test, PiecesOfStackedExpertsAndQkNorm) {
  const LlamaConfig config = SmallQwen3Config(/*experts=*/true);
  auto model = SmallQwen3(config);
  ASSERT_TRUE(Save((dir_ / "whole").string(), ModelPieces(*model), ModelMetadata(config)).ok());
  std::vector<CheckpointPiece> split;
  for (const CheckpointPiece& whole : ModelPieces(*model)) {
    float* data = whole.data.data_as<float>();
    const std::vector<int64_t>& full = whole.full_shape;
    if (full.size() == 3) {  // experts 0..1 whole, 2..3 in two column halves
      const int64_t rows = full[1], cols = full[2], half = cols / 2, expert = rows * cols;
      split.push_back({whole.name, full, {0, 0, 0}, {data, DType::kF32, {}, {2, rows, cols}, {}}});
      split.push_back({whole.name,
                       full,
                       {2, 0, 0},
                       {data + 2 * expert, DType::kF32, {}, {2, rows, half}, {expert, cols, 1}}});
      split.push_back(
          {whole.name,
           full,
           {2, 0, half},
           {data + 2 * expert + half, DType::kF32, {}, {2, rows, cols - half}, {expert, cols, 1}}});
    } else if (whole.name.find(".attention.q_norm.") != std::string::npos ||
               whole.name.find(".attention.k_norm.") != std::string::npos) {
      split.push_back({whole.name, full, {0}, FlatF32(data, 5)});
      split.push_back({whole.name, full, {5}, FlatF32(data + 5, full[0] - 5)});
    } else {
      split.push_back(whole);
    }
  }
  ASSERT_TRUE(Save((dir_ / "split").string(), split, ModelMetadata(config)).ok());
  EXPECT_EQ(ReadFile(dir_ / "split" / "model.safetensors"),
            ReadFile(dir_ / "whole" / "model.safetensors"));

  // Experts 1..2 of w2 [4, 64, 32], columns 5..19, in a buffer with rows of 20 floats; and
  // elements 3..10 of a k_norm.
  const int64_t d = config.dim, h = config.moe.hidden_dim, stride = 20;
  std::vector<float> experts(2 * d * stride, -7.0f), norm(8, -7.0f);
  std::vector<CheckpointPiece> pieces = {
      {"model/layers.1.moe.experts.w2",
       {4, d, h},
       {1, 0, 5},
       {experts.data(), DType::kF32, {}, {2, d, 15}, {d * stride, stride, 1}}},
      {"model/layers.0.attention.k_norm.weight", {24}, {3}, FlatF32(norm.data(), 8)}};
  ASSERT_TRUE(Load((dir_ / "whole").string(), pieces).ok());
  const float* w2 = model->params().Find("layers.1.moe.experts.w2")->data<float>();
  for (int64_t e = 0; e < 2; ++e) {
    for (int64_t r = 0; r < d; ++r) {
      for (int64_t c = 0; c < stride; ++c) {
        const float got = experts[(e * d + r) * stride + c];
        EXPECT_EQ(got, c < 15 ? w2[((1 + e) * d + r) * h + 5 + c] : -7.0f) << e << " " << r;
      }
    }
  }
  const float* k_norm = model->params().Find("layers.0.attention.k_norm.weight")->data<float>();
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(norm[i], k_norm[3 + i]);
}

// A config.json whose experts are more or fewer than the file's, and pieces of a model Hugging
// Face's layout cannot hold, are named.
TEST_F(SafetensorsQwen3Test, Qwen3MoeMismatchesAreNamed) {
  const LlamaConfig config = SmallQwen3Config(/*experts=*/true);
  auto model = SmallQwen3(config);
  const fs::path folder = dir_ / "e";
  ASSERT_TRUE(Save(folder.string(), ModelPieces(*model), ModelMetadata(config)).ok());
  const std::string json = ReadFile(folder / "config.json");
  Json edited = Json::parse(json);
  edited["num_experts"] = 5;
  WriteFile(folder / "config.json", edited.dump());
  EXPECT_THAT(std::string(plugin_->Read(folder.string()).status().message()),
              HasSubstr("no tensor 'model.layers.0.mlp.experts.4.gate_proj.weight' (titan's "
                        "'layers.0.moe.experts.w1', expert 4), which the model of "));
  edited["num_experts"] = 3;
  WriteFile(folder / "config.json", edited.dump());
  EXPECT_THAT(std::string(plugin_->Read(folder.string()).status().message()),
              HasSubstr("tensor 'model.layers.0.mlp.experts.3.gate_proj.weight' is not part of "
                        "the model " +
                        (folder / "config.json").string() + " describes (3 layers, 3 experts)"));
  WriteFile(folder / "config.json", json);

  // A model of 3 experts does not take the file's 4.
  LlamaConfig three = config;
  three.moe.experts = 3;
  auto smaller = SmallQwen3(three);
  EXPECT_THAT(std::string(Load(folder.string(), ModelPieces(*smaller)).message()),
              HasSubstr("tensor 'model/layers.0.moe.router.gate.weight': " + folder.string() +
                        " holds shape [4, 64], expected [3, 64]"));
  std::vector<float> three_experts(3 * 32 * 64);
  std::vector<CheckpointPiece> stacked = {
      {"model/layers.0.moe.experts.w1",
       {3, 32, 64},
       {0, 0, 0},
       {three_experts.data(), DType::kF32, {}, {3, 32, 64}, {}}}};
  EXPECT_THAT(std::string(Load(folder.string(), stacked).message()),
              HasSubstr("tensor 'model/layers.0.moe.experts.w1': " + folder.string() +
                        " holds shape [4, 32, 64], expected [3, 32, 64]"));

  // Shared experts have no place in Qwen3-MoE; experts without QK-norm are not Qwen3's.
  CheckpointMetadata metadata = ModelMetadata(config);
  metadata["model.shared_experts"] = "1";
  EXPECT_THAT(std::string(Save((dir_ / "s").string(), ModelPieces(*model), metadata).message()),
              HasSubstr("checkpoint metadata 'model.shared_experts' = 1: Hugging Face's "
                        "Qwen3-MoE has no shared experts"));
  metadata = ModelMetadata(config);
  metadata["model.qk_norm"] = "false";
  EXPECT_THAT(std::string(Save((dir_ / "q").string(), ModelPieces(*model), metadata).message()),
              HasSubstr("'model.experts' = 4: titan exports a mixture of experts as Hugging "
                        "Face's Qwen3-MoE, which has QK-norm"));
  EXPECT_FALSE(fs::exists(dir_ / "s"));
}

// Qwen3-30B-A3B's config.json as published describes titan's 30B-A3B flavor: importing it checks
// no size against another, and takes only what the flavor already has.
TEST(HfQwen3Config, PublishedQwen3MoeConfigIsTheFlavors) {
  const char* published = R"({
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
    "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
    "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
    "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
    "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";
  absl::StatusOr<safetensors::ModelShape> shape =
      safetensors::ModelShapeFromHfConfig(published, "config.json");
  ASSERT_TRUE(shape.ok()) << shape.status();
  absl::StatusOr<LlamaConfig> flavor = Qwen3Family().Flavor("30B-A3B");
  ASSERT_TRUE(flavor.ok()) << flavor.status();
  LlamaConfig config = *flavor;
  absl::StatusOr<std::vector<std::string>> adopted =
      AdoptCheckpointModel(safetensors::MetadataOf(*shape), "config.json", "30B-A3B", config);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_TRUE(adopted->empty());
  // And titan's export of the flavor writes the same values back.
  const Json ours = Json::parse(safetensors::HfConfigJson(
      *safetensors::ModelShapeFromMetadata(CheckpointMetadataOf(*flavor, 40960)), DType::kBF16));
  const Json theirs = Json::parse(published);
  for (const auto& [key, value] : ours.items()) {
    if (key == "bos_token_id" || key == "eos_token_id") continue;  // the tokenizer's: unknown
    EXPECT_EQ(value, theirs.at(key)) << key;
  }
}

}  // namespace
}  // namespace titan::safetensors_testing
