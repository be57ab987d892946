// The safetensors plugin as titan loads it, on one rank: exports, imports and their errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "plugins/checkpoint/safetensors/hf_layout.h"
#include "plugins/checkpoint/safetensors/safetensors_file.h"
#include "plugins/checkpoint/safetensors/safetensors_test_util.h"
#include "tests/checkpoint/file_size_limit.h"
#include "titan/float16.h"

namespace titan::safetensors_testing {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

// A model's parameters as pieces of their own dtype-converted copies.
struct Converted {
  std::vector<std::vector<uint16_t>> storage;
  std::vector<CheckpointPiece> pieces;
};

Converted AsBf16(const DecoderModel& model) {
  Converted c;
  c.storage.reserve(model.Parameters().size());
  for (CheckpointPiece piece : ModelPieces(model)) {
    std::vector<uint16_t>& bits = c.storage.emplace_back(piece.data.numel());
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = F32ToBf16(piece.data.data_as<float>()[i]);
    piece.data = TensorView{bits.data(), DType::kBF16, Device{}, piece.data.shape, {}};
    c.pieces.push_back(piece);
  }
  return c;
}

TEST_F(SafetensorsTest, F32ExportImportIsBitwise) {
  const LlamaConfig config = SmallConfig();
  auto model = SmallModel(config);
  CheckpointMetadata metadata = ModelMetadata(config);
  metadata["train.step"] = "120";
  const std::string folder = (dir_ / "export").string();
  ASSERT_TRUE(Save(folder, ModelPieces(*model), metadata).ok());
  EXPECT_TRUE(fs::exists(dir_ / "export" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ / "export" / "config.json"));
  EXPECT_FALSE(fs::exists(dir_ / "export.tmp")) << "the staging folder is renamed";

  auto loaded = SmallModel(config, /*seed=*/7);
  ASSERT_NE(ParameterBytes(*loaded), ParameterBytes(*model));
  absl::Status status = Load(folder, ModelPieces(*loaded));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(ParameterBytes(*loaded), ParameterBytes(*model));

  absl::StatusOr<CheckpointContents> contents = plugin_->Read(folder);
  ASSERT_TRUE(contents.ok()) << contents.status();
  ASSERT_EQ(contents->tensors.size(), model->Parameters().size());
  for (const CheckpointTensor& t : contents->tensors) {
    EXPECT_EQ(t.dtype, DType::kF32);
    EXPECT_TRUE(t.name.starts_with("model/")) << t.name;
  }
  EXPECT_EQ(contents->tensors.front().name, "model/layers.0.attention.wk.weight");
  EXPECT_EQ(contents->tensors.front().full_shape, (std::vector<int64_t>{32, 64}));
  for (const auto& [key, value] : metadata) EXPECT_EQ(contents->metadata[key], value) << key;
}

TEST_F(SafetensorsTest, Bf16ExportRoundsToNearestEven) {
  const LlamaConfig config = SmallConfig();
  auto model = SmallModel(config);
  Converted bf16 = AsBf16(*model);
  const std::string folder = (dir_ / "bf16").string();
  ASSERT_TRUE(Save(folder, bf16.pieces, ModelMetadata(config)).ok());
  EXPECT_EQ(Json::parse(ReadFile(dir_ / "bf16" / "config.json"))["torch_dtype"], "bfloat16");
  EXPECT_EQ(plugin_->Read(folder)->tensors[0].dtype, DType::kBF16);

  // Into f32: the bf16 values exactly; into bf16: the same bits.
  auto loaded = SmallModel(config, 7);
  ASSERT_TRUE(Load(folder, ModelPieces(*loaded)).ok());
  Converted again = AsBf16(*model);
  for (auto& bits : again.storage) std::fill(bits.begin(), bits.end(), 0);
  ASSERT_TRUE(Load(folder, again.pieces).ok());
  double worst = 0;
  for (size_t p = 0; p < model->Parameters().size(); ++p) {
    const float* original = model->Parameters()[p].value.data_as<float>();
    const float* back = loaded->Parameters()[p].value.data_as<float>();
    ASSERT_EQ(again.storage[p], bf16.storage[p]);
    for (size_t i = 0; i < bf16.storage[p].size(); ++i) {
      ASSERT_EQ(back[i], Bf16ToF32(bf16.storage[p][i]));
      worst = std::max(worst, std::fabs(double{back[i]} - original[i]) / std::fabs(original[i]));
    }
  }
  EXPECT_LE(worst, 1.0 / 256) << "bf16 keeps 8 significant bits: at most half a unit off";
}

// The stored q_proj/k_proj rows are titan's rows in Hugging Face's order; the others as titan
// keeps them.
TEST_F(SafetensorsTest, StoresQueryAndKeyRowsInHuggingFaceOrder) {
  const LlamaConfig config = SmallConfig();
  auto model = SmallModel(config);
  ASSERT_TRUE(Save((dir_ / "e").string(), ModelPieces(*model), ModelMetadata(config)).ok());
  const std::string file = ReadFile(dir_ / "e" / "model.safetensors");
  auto header = safetensors::ParseHeader(file, "model.safetensors");
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->metadata.at("format"), "pt");
  auto stored = [&](const std::string& name) -> const float* {
    for (const auto& t : header->tensors) {
      if (t.name == name)
        return reinterpret_cast<const float*>(&file[header->data_start + t.begin]);
    }
    return nullptr;
  };
  const int64_t d = config.dim, hd = config.head_dim();
  const float* wq = model->params().Find("layers.1.attention.wq.weight")->data<float>();
  const float* wk = model->params().Find("layers.1.attention.wk.weight")->data<float>();
  const float* wv = model->params().Find("layers.1.attention.wv.weight")->data<float>();
  const float* q = stored("model.layers.1.self_attn.q_proj.weight");
  const float* k = stored("model.layers.1.self_attn.k_proj.weight");
  const float* v = stored("model.layers.1.self_attn.v_proj.weight");
  ASSERT_TRUE(q && k && v);
  // Row 1 of HF's first head is titan's row 2 (the first component of pair 1).
  EXPECT_EQ(0, std::memcmp(q + 1 * d, wq + 2 * d, d * sizeof(float)));
  for (int64_t row = 0; row < d; ++row) {
    EXPECT_EQ(0, std::memcmp(q + row * d, wq + safetensors::TitanRow(row, hd) * d, d * 4));
  }
  for (int64_t row = 0; row < config.n_kv_heads * hd; ++row) {
    EXPECT_EQ(0, std::memcmp(k + row * d, wk + safetensors::TitanRow(row, hd) * d, d * 4));
    EXPECT_EQ(0, std::memcmp(v + row * d, wv + row * d, d * 4));
  }
}

// A rank holding rows 3..8, columns 5..19 of wq (in a buffer with wider rows) receives exactly
// those values and nothing outside them.
TEST_F(SafetensorsTest, LoadFillsOnlyTheRequestedRange) {
  const LlamaConfig config = SmallConfig();
  auto model = SmallModel(config);
  ASSERT_TRUE(Save((dir_ / "e").string(), ModelPieces(*model), ModelMetadata(config)).ok());
  const int64_t rows = 6, cols = 15, stride = 20;
  std::vector<float> buffer(rows * stride, -7.0f);
  std::vector<uint16_t> norm(10, 0);
  std::vector<CheckpointPiece> pieces = {
      {"model/layers.0.attention.wq.weight",
       {64, 64},
       {3, 5},
       TensorView{buffer.data(), DType::kF32, Device{}, {rows, cols}, {stride, 1}}},
      {"model/layers.1.ffn_norm.weight",
       {64},
       {50},
       TensorView{norm.data(), DType::kBF16, Device{}, {10}, {}}}};
  ASSERT_TRUE(Load((dir_ / "e").string(), pieces).ok());
  const float* wq = model->params().Find("layers.0.attention.wq.weight")->data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < stride; ++c) {
      EXPECT_EQ(buffer[r * stride + c], c < cols ? wq[(3 + r) * 64 + 5 + c] : -7.0f)
          << r << "," << c;
    }
  }
  const float* ffn_norm = model->params().Find("layers.1.ffn_norm.weight")->data<float>();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(norm[i], F32ToBf16(ffn_norm[50 + i]));
}

// Each tensor split over pieces (by rows, by columns, replicated) gives the same file as whole.
TEST_F(SafetensorsTest, PiecesAssembleIntoTheSameFile) {
  const LlamaConfig config = SmallConfig();
  auto model = SmallModel(config);
  ASSERT_TRUE(Save((dir_ / "whole").string(), ModelPieces(*model), ModelMetadata(config)).ok());
  std::vector<CheckpointPiece> split;
  for (const CheckpointPiece& whole : ModelPieces(*model)) {
    const int64_t rows = whole.full_shape[0];
    float* data = whole.data.data_as<float>();
    if (whole.full_shape.size() == 1) {
      split.push_back({whole.name, whole.full_shape, {0}, FlatF32(data, rows / 2)});
      split.push_back(
          {whole.name, whole.full_shape, {rows / 2}, FlatF32(data + rows / 2, rows - rows / 2)});
      split.push_back(split.back());  // a replica
      continue;
    }
    const int64_t cols = whole.full_shape[1], top = rows / 3, left = cols / 4;
    split.push_back({whole.name,
                     whole.full_shape,
                     {0, 0},
                     TensorView{data, DType::kF32, Device{}, {top, cols}, {}}});
    split.push_back(
        {whole.name,
         whole.full_shape,
         {top, 0},
         TensorView{data + top * cols, DType::kF32, Device{}, {rows - top, left}, {cols, 1}}});
    split.push_back({whole.name,
                     whole.full_shape,
                     {top, left},
                     TensorView{data + top * cols + left,
                                DType::kF32,
                                Device{},
                                {rows - top, cols - left},
                                {cols, 1}}});
  }
  ASSERT_TRUE(Save((dir_ / "split").string(), split, ModelMetadata(config)).ok());
  EXPECT_EQ(ReadFile(dir_ / "split" / "model.safetensors"),
            ReadFile(dir_ / "whole" / "model.safetensors"));
  split.pop_back();  // now part of the last tensor is missing
  EXPECT_THAT(
      std::string(Save((dir_ / "gap").string(), split, ModelMetadata(config)).message()),
      HasSubstr("the pieces of 'model/output.weight' [97, 64] cover 3088 of its 6208 elements"));
}

TEST_F(SafetensorsTest, TiedEmbeddingsHaveNoLmHead) {
  const LlamaConfig tied = SmallConfig(/*tied=*/true);
  auto model = SmallModel(tied);
  ASSERT_TRUE(Save((dir_ / "t").string(), ModelPieces(*model), ModelMetadata(tied)).ok());
  const Json config = Json::parse(ReadFile(dir_ / "t" / "config.json"));
  EXPECT_EQ(config["tie_word_embeddings"], true);
  auto contents = plugin_->Read((dir_ / "t").string());
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->metadata["model.tie_embeddings"], "true");
  for (const auto& t : contents->tensors) EXPECT_NE(t.name, "model/output.weight");
  // An untied model takes the tied embeddings as its output projection too.
  auto untied = SmallModel(SmallConfig(false), 7);
  ASSERT_TRUE(Load((dir_ / "t").string(), ModelPieces(*untied)).ok());
  EXPECT_EQ(ParameterBytes(*untied).back(), ParameterBytes(*model).front());
  // Metadata that says otherwise is refused.
  EXPECT_THAT(
      std::string(
          Save((dir_ / "u").string(), ModelPieces(*model), ModelMetadata(SmallConfig(false)))
              .message()),
      HasSubstr("'model.tie_embeddings' is false but the pieces lack 'model/output.weight'"));
}

TEST_F(SafetensorsTest, ShapeMismatchNamesTensorShapesAndFolder) {
  const LlamaConfig config = SmallConfig();
  auto model = SmallModel(config);
  const std::string folder = (dir_ / "e").string();
  ASSERT_TRUE(Save(folder, ModelPieces(*model), ModelMetadata(config)).ok());
  LlamaConfig other = config;
  other.vocab_size = 98;
  auto wrong = SmallModel(other);
  EXPECT_THAT(std::string(Load(folder, ModelPieces(*wrong)).message()),
              HasSubstr("tensor 'model/tok_embeddings.weight': " + folder +
                        " holds shape [97, 64], expected [98, 64]"));
}

TEST_F(SafetensorsTest, HoldsTheModelOnly) {
  const LlamaConfig config = SmallConfig();
  auto model = SmallModel(config);
  std::vector<CheckpointPiece> pieces = ModelPieces(*model);
  std::vector<float> state(64);
  pieces.push_back({"optimizer/exp_avg/norm.weight", {64}, {0}, FlatF32(state.data(), 64)});
  std::vector<int64_t> step = {120};  // the trainer's i64 state comes first here
  pieces.insert(pieces.begin(), {"train/step", {1}, {0}, {step.data(), DType::kI64, {}, {1}, {}}});
  const std::string folder = (dir_ / "e").string();
  EXPECT_THAT(std::string(Save(folder, pieces, ModelMetadata(config)).message()),
              HasSubstr("safetensors checkpoints hold the model only; asked to save "
                        "'train/step' and 1 more pieces outside model/"));
  EXPECT_FALSE(fs::exists(folder));
  pieces.erase(pieces.begin());
  pieces.pop_back();
  ASSERT_TRUE(Save(folder, pieces, ModelMetadata(config)).ok());
  EXPECT_THAT(
      std::string(Load(folder, {{"train/step", {1}, {0}, FlatF32(state.data(), 1)}}).message()),
      HasSubstr("hold the model only; " + folder + " has no 'train/step'"));
}

TEST_F(SafetensorsTest, SaveChecksPiecesAgainstTheMetadata) {
  const LlamaConfig config = SmallConfig();
  auto model = SmallModel(config);
  std::vector<CheckpointPiece> pieces = ModelPieces(*model);
  const std::string folder = (dir_ / "e").string();
  auto error = [&](const std::vector<CheckpointPiece>& p, const CheckpointMetadata& m) {
    return std::string(Save(folder, p, m).message());
  };
  std::vector<CheckpointPiece> missing = pieces;
  missing.erase(missing.begin() + 1);
  ASSERT_EQ(pieces[1].name, "model/layers.0.attention_norm.weight");
  EXPECT_THAT(error(missing, ModelMetadata(config)),
              HasSubstr("saving " + folder +
                        ": no rank holds 'model/layers.0.attention_norm.weight' [64]"));
  CheckpointMetadata metadata = ModelMetadata(config);
  metadata["model.n_layers"] = "1";
  EXPECT_THAT(error(pieces, metadata),
              HasSubstr("'model/layers.1.attention.wk.weight' is not a parameter of the model the "
                        "metadata describes (1 layers)"));
  metadata = ModelMetadata(config);
  metadata["model.n_kv_heads"] = "4";
  EXPECT_THAT(error(pieces, metadata),
              HasSubstr("'model/layers.0.attention.wk.weight' has shape [32, 64], the metadata's "
                        "model implies [64, 64]"));
  metadata.erase("model.rope_theta");
  EXPECT_THAT(error(pieces, metadata),
              HasSubstr("the checkpoint metadata lacks 'model.rope_theta'"));
  EXPECT_FALSE(fs::exists(folder));
  EXPECT_FALSE(fs::exists(folder + ".tmp"));
}

TEST_F(SafetensorsTest, SaveThatRunsOutOfSpaceLeavesNoStagingFolder) {
  const LlamaConfig config = SmallConfig();
  auto model = SmallModel(config);
  const std::string folder = (dir_ / "full").string();
  absl::Status status;
  {
    FileSizeLimit limit(4096);
    status = Save(folder, ModelPieces(*model), ModelMetadata(config));
  }
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("model.safetensors"));
  EXPECT_FALSE(fs::exists(folder + ".tmp"));
  EXPECT_FALSE(fs::exists(folder));
}

TEST_F(SafetensorsTest, ReplacesAnEarlierExportButNoOtherFolder) {
  const LlamaConfig config = SmallConfig();
  auto first = SmallModel(config, 1), second = SmallModel(config, 2);
  const std::string folder = (dir_ / "e").string();
  ASSERT_TRUE(Save(folder, ModelPieces(*first), ModelMetadata(config)).ok());
  ASSERT_TRUE(Save(folder + "/", ModelPieces(*second), ModelMetadata(config)).ok());
  auto loaded = SmallModel(config, 3);
  ASSERT_TRUE(Load(folder, ModelPieces(*loaded)).ok());
  EXPECT_EQ(ParameterBytes(*loaded), ParameterBytes(*second));
  EXPECT_FALSE(fs::exists(folder + ".old"));

  fs::create_directories(dir_ / "notes");
  WriteFile(dir_ / "notes" / "todo.txt", "keep me");
  EXPECT_THAT(
      std::string(
          Save((dir_ / "notes").string(), ModelPieces(*first), ModelMetadata(config)).message()),
      HasSubstr("notes holds todo.txt, which is not part of a safetensors export; "
                "refusing to replace the folder"));
  EXPECT_EQ(ReadFile(dir_ / "notes" / "todo.txt"), "keep me");
  // A downloaded model keeps its tokenizer beside the weights: not ours to remove.
  WriteFile(dir_ / "e" / "tokenizer.json", "{}");
  EXPECT_THAT(std::string(Save(folder, ModelPieces(*first), ModelMetadata(config)).message()),
              HasSubstr("holds tokenizer.json, which is not part of a safetensors export"));
  EXPECT_TRUE(fs::exists(dir_ / "e" / "model.safetensors"));
}

// Hugging Face's own large exports: tensors split over files that an index maps them to.
TEST_F(SafetensorsTest, ReadsAnIndexOfSeveralFiles) {
  const LlamaConfig config = SmallConfig();
  auto model = SmallModel(config);
  ASSERT_TRUE(Save((dir_ / "one").string(), ModelPieces(*model), ModelMetadata(config)).ok());
  const std::string file = ReadFile(dir_ / "one" / "model.safetensors");
  auto header = safetensors::ParseHeader(file, "model.safetensors");
  ASSERT_TRUE(header.ok());
  fs::create_directories(dir_ / "two");
  fs::copy_file(dir_ / "one" / "config.json", dir_ / "two" / "config.json");
  Json index = {{"metadata", {{"total_size", file.size() - header->data_start}}},
                {"weight_map", Json::object()}};
  // Layer 1 in the second file, everything else in the first.
  for (int part = 0; part < 2; ++part) {
    std::vector<safetensors::TensorEntry> entries;
    for (const auto& t : header->tensors) {
      if ((t.name.find("layers.1.") != std::string::npos) == (part == 1)) entries.push_back(t);
    }
    const std::string name = absl::StrCat("model-0000", part + 1, "-of-00002.safetensors");
    auto writer = safetensors::FileWriter::Create((dir_ / "two" / name).string(), entries, {});
    ASSERT_TRUE(writer.ok());
    for (const auto& t : (*writer)->tensors()) {
      const auto& original = *std::find_if(header->tensors.begin(), header->tensors.end(),
                                           [&](const auto& e) { return e.name == t.name; });
      ASSERT_TRUE(
          (*writer)->Append(&file[header->data_start + original.begin], t.end - t.begin).ok());
      index["weight_map"][t.name] = name;
    }
    ASSERT_TRUE((*writer)->Close().ok());
  }
  WriteFile(dir_ / "two" / "model.safetensors.index.json", index.dump());
  auto loaded = SmallModel(config, 7);
  absl::Status status = Load((dir_ / "two").string(), ModelPieces(*loaded));
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(ParameterBytes(*loaded), ParameterBytes(*model));

  index["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors";
  WriteFile(dir_ / "two" / "model.safetensors.index.json", index.dump());
  EXPECT_THAT(std::string(plugin_->Read((dir_ / "two").string()).status().message()),
              HasSubstr("weight_map puts 'model.norm.weight' in model-00002-of-00002.safetensors, "
                        "which does not hold it"));
  index["weight_map"]["model.norm.weight"] = "../one/model.safetensors";
  WriteFile(dir_ / "two" / "model.safetensors.index.json", index.dump());
  EXPECT_THAT(std::string(plugin_->Read((dir_ / "two").string()).status().message()),
              HasSubstr("expected a file name in the folder"));
}

TEST_F(SafetensorsTest, FoldersThatAreNotExportsAreNamed) {
  const std::string missing = (dir_ / "none").string();
  EXPECT_THAT(std::string(plugin_->Read(missing).status().message()),
              HasSubstr(missing + ": no such folder"));
  EXPECT_THAT(std::string(plugin_->Read(dir_.string()).status().message()),
              HasSubstr("expected model.safetensors or model.safetensors.index.json, found "
                        "neither: not a safetensors checkpoint"));
  const LlamaConfig config = SmallConfig();
  auto model = SmallModel(config);
  const std::string folder = (dir_ / "e").string();
  ASSERT_TRUE(Save(folder, ModelPieces(*model), ModelMetadata(config)).ok());
  fs::remove(dir_ / "e" / "config.json");
  EXPECT_THAT(std::string(Load(folder, ModelPieces(*model)).message()),
              HasSubstr(folder + "/config.json: missing"));
  // A folder in its place is named as one (issue #39), not as JSON that does not parse.
  fs::create_directory(dir_ / "e" / "config.json");
  EXPECT_THAT(std::string(Load(folder, ModelPieces(*model)).message()),
              HasSubstr(folder + "/config.json: not a file (a folder?)"));
}

}  // namespace
}  // namespace titan::safetensors_testing
