// The safetensors export against Hugging Face's Llama (hf_llama_reference.py: transformers'
// LlamaForCausalLM written out in torch): from config.json and model.safetensors alone it
// reproduces titan's logits within 1e-5 relative error, f32 and bf16, tied and untied, with
// Llama 3 rope scaling. And a folder laid out by transformers' own conversion (its permute() of
// wq/wk, several files and an index) imports into titan bit for bit. With bench/torch-venv made,
// transformers itself loads both and agrees.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/model/config.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/single_process_comm.h"
#include "tests/checkpoint/model_checkpoint.h"
#include "tests/reference/reference_files.h"
#include "titan/float16.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using checkpoint_testing::ModelMetadata;
using checkpoint_testing::ModelPieces;
using checkpoint_testing::SmallConfig;
using checkpoint_testing::SmallModel;

constexpr int64_t kBatch = 2, kSeqLen = 40;  // past the rope's original context of 32

class SafetensorsReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(reference::HaveTorch()) << reference::kNoTorch;
    registry_ = std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value();
    plugin_ = std::move(registry_->Create<CheckpointPlugin>("safetensors")).value();
    root_ = fs::path(testing::TempDir()) / absl::StrCat("titan_safetensors_reference_", getpid());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes the tokens and titan's logits for them beside the export in `dir`.
  void WriteCase(DecoderModel& model, const fs::path& dir, const std::string& extra = "") {
    std::vector<int32_t> tokens, targets;
    const int64_t vocab = model.config().vocab_size;
    for (int64_t i = 0; i < kBatch * kSeqLen; ++i) {
      tokens.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
      targets.push_back(static_cast<int32_t>((i * 53 + 7) % vocab));
    }
    ASSERT_TRUE(model.Forward(tokens.data(), targets.data(), kBatch, kSeqLen).ok());
    reference::WriteBinary(dir / "tokens.bin", tokens.data(), tokens.size());
    reference::WriteBinary(dir / "titan_logits.bin", model.logits().data_as<const float>(),
                           static_cast<size_t>(kBatch * kSeqLen * vocab));
    std::FILE* file = std::fopen((dir / "case.txt").c_str(), "w");
    std::fprintf(file, "batch %ld\nseq_len %ld\n%s", kBatch, kSeqLen, extra.c_str());
    std::fclose(file);
  }

  absl::Status Save(const fs::path& folder, const std::vector<CheckpointPiece>& pieces,
                    const LlamaConfig& config) {
    return plugin_->Save(folder.string(), pieces, ModelMetadata(config), comm_);
  }
  absl::Status Load(const fs::path& folder, DecoderModel& model) {
    std::vector<CheckpointPiece> pieces = ModelPieces(model);
    return plugin_->Load(folder.string(), pieces, comm_);
  }

  std::unique_ptr<PluginRegistry> registry_;
  std::unique_ptr<CheckpointPlugin> plugin_;
  SingleProcessCommunicator comm_;
  fs::path root_;
};

TEST_F(SafetensorsReferenceTest, HuggingFaceForwardReproducesTitanLogits) {
  std::vector<std::string> cases;
  for (bool tied : {false, true}) {
    const LlamaConfig config = SmallConfig(tied);
    auto model = SmallModel(config);
    const std::string name = tied ? "tied_f32" : "untied_f32";
    const fs::path dir = root_ / name;
    ASSERT_TRUE(Save(dir / "export", ModelPieces(*model), config).ok());
    WriteCase(*model, dir);
    cases.push_back(name);
    if (tied) continue;
    // The same model exported in bf16; titan imports that export and runs it in f32.
    std::vector<std::vector<uint16_t>> storage;
    std::vector<CheckpointPiece> pieces = ModelPieces(*model);
    storage.reserve(pieces.size());
    for (CheckpointPiece& piece : pieces) {
      std::vector<uint16_t>& bits = storage.emplace_back(piece.data.numel());
      for (size_t i = 0; i < bits.size(); ++i) bits[i] = F32ToBf16(piece.data.data_as<float>()[i]);
      piece.data = TensorView{bits.data(), DType::kBF16, Device{}, piece.data.shape, {}};
    }
    const fs::path bf16 = root_ / "untied_bf16";
    ASSERT_TRUE(Save(bf16 / "export", pieces, config).ok());
    auto imported = SmallModel(config, /*seed=*/3);
    ASSERT_TRUE(Load(bf16 / "export", *imported).ok());
    WriteCase(*imported, bf16, "f32_export " + (dir / "export").string() + "\n");
    cases.push_back("untied_bf16");
  }
  std::string command =
      absl::StrCat("/usr/bin/python3 ", TITAN_SOURCE_DIR, "/tests/reference/hf_llama_reference.py");
  for (const std::string& name : cases) absl::StrAppend(&command, " ", (root_ / name).string());
  ASSERT_EQ(std::system(command.c_str()), 0) << "the reference failed: " << command;

  for (const std::string& name : cases) {
    SCOPED_TRACE(name);
    const std::vector<float> titan = reference::ReadFloats(root_ / name / "titan_logits.bin");
    const std::vector<float> hf = reference::ReadFloats(root_ / name / "hf_logits.bin");
    ASSERT_EQ(titan.size(), hf.size());
    ASSERT_EQ(hf.size(), static_cast<size_t>(kBatch * kSeqLen * 97));
    const double error = reference::RelativeError(titan.data(), hf.data(), hf.size());
    EXPECT_LT(error, 1e-5);
    std::printf("%-12s logits relative error %.3g\n", name.c_str(), error);
  }
}

// titan's exports (tied and untied, Llama 3 rope scaling) and transformers' conversion of the same
// weights (hf_written/) against transformers itself (bench/torch-venv's LlamaForCausalLM): each
// loads with no tensor missing or unexpected and no warning, and gives titan's logits within 1e-5;
// and what transformers' save_pretrained writes imports into titan with its logits within 1e-5.
TEST_F(SafetensorsReferenceTest, TransformersItselfLoadsTheExportsAndAgrees) {
  const std::string python = reference::TransformersPython();
  if (python.empty()) GTEST_SKIP() << reference::kNoTransformers;
  std::string dirs;
  for (bool tied : {false, true}) {
    const LlamaConfig config = SmallConfig(tied);
    auto model = SmallModel(config);
    const fs::path dir = root_ / (tied ? "tied" : "untied");
    ASSERT_TRUE(Save(dir / "export", ModelPieces(*model), config).ok());
    WriteCase(*model, dir);
    reference::WriteModel(config, *model, kBatch, kSeqLen,
                          dir);  // the reference writes hf_written/
    absl::StrAppend(&dirs, " ", dir.string());
  }
  const std::string command = absl::StrCat("/usr/bin/python3 ", TITAN_SOURCE_DIR,
                                           "/tests/reference/hf_llama_reference.py", dirs);
  ASSERT_EQ(std::system(command.c_str()), 0) << "the reference failed: " << command;
  ASSERT_TRUE(reference::TransformersAgree(python, dirs));
  // transformers -> titan: the folder transformers' save_pretrained wrote (transformers 5's
  // rope_parameters in place of rope_theta and rope_scaling), imported as titan-run does.
  for (bool tied : {false, true}) {
    const fs::path dir = root_ / (tied ? "tied" : "untied");
    absl::StatusOr<CheckpointContents> contents = plugin_->Read((dir / "tf_saved").string());
    ASSERT_TRUE(contents.ok()) << contents.status();
    LlamaConfig config = SmallConfig(tied);
    absl::StatusOr<std::vector<std::string>> adopted =
        AdoptCheckpointModel(contents->metadata, "tf_saved", "small", config);
    ASSERT_TRUE(adopted.ok()) << adopted.status();
    EXPECT_TRUE(adopted->empty()) << "the same norm_eps and RoPE";
    auto imported = SmallModel(config, /*seed=*/5);
    ASSERT_TRUE(Load(dir / "tf_saved", *imported).ok());
    const std::vector<int32_t> tokens = reference::ReadBinary<int32_t>(dir / "tokens.bin");
    ASSERT_TRUE(imported->Forward(tokens.data(), tokens.data(), kBatch, kSeqLen).ok());
    const std::vector<float> theirs = reference::ReadFloats(dir / "tf_saved_logits.bin");
    ASSERT_EQ(theirs.size(), static_cast<size_t>(imported->logits().numel()));
    const double error = reference::RelativeError(imported->logits().data_as<const float>(),
                                                  theirs.data(), theirs.size());
    EXPECT_LT(error, 1e-5);
    std::printf("%-7s transformers' save_pretrained imported: %.3g (logits relative error)\n",
                tied ? "tied" : "untied", error);
  }
}

// A Llama 2 style export (rope_theta 10000, no rope scaling, eps 1e-6) imported into a model
// of another flavor's settings, as titan-run does: with the settings AdoptCheckpointModel takes
// from the checkpoint titan reproduces Hugging Face's logits; with the flavor's it would not.
TEST_F(SafetensorsReferenceTest, ImportTakesTheCheckpointsRopeAndNormEps) {
  LlamaConfig llama2 = SmallConfig();
  llama2.rope.theta = 10000.0, llama2.rope.scaled = false, llama2.norm_eps = 1e-6;
  auto model = SmallModel(llama2);
  const fs::path dir = root_ / "llama2";
  ASSERT_TRUE(Save(dir / "export", ModelPieces(*model), llama2).ok());

  LlamaConfig flavor = SmallConfig();
  flavor.rope.theta = 500000.0, flavor.norm_eps = 1e-5;  // Llama 3's, scaled
  LlamaConfig adopted = flavor;
  absl::StatusOr<CheckpointContents> contents = plugin_->Read((dir / "export").string());
  ASSERT_TRUE(contents.ok()) << contents.status();
  absl::StatusOr<std::vector<std::string>> changed =
      AdoptCheckpointModel(contents->metadata, "export", "small", adopted);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed->size(), 3u);  // norm_eps, rope_theta, rope_scaled

  auto imported = SmallModel(adopted, /*seed=*/9);
  ASSERT_TRUE(Load(dir / "export", *imported).ok());
  WriteCase(*imported, dir);  // the reference fails beyond 1e-5 of Hugging Face's logits
  const std::string command = absl::StrCat("/usr/bin/python3 ", TITAN_SOURCE_DIR,
                                           "/tests/reference/hf_llama_reference.py ", dir.string());
  ASSERT_EQ(std::system(command.c_str()), 0) << "the reference failed: " << command;

  // The flavor's settings on the same weights: what titan-run computed before it took them.
  auto unadopted = SmallModel(flavor, /*seed=*/9);
  ASSERT_TRUE(Load(dir / "export", *unadopted).ok());
  const std::vector<int32_t> tokens = reference::ReadBinary<int32_t>(dir / "tokens.bin");
  ASSERT_TRUE(unadopted->Forward(tokens.data(), tokens.data(), kBatch, kSeqLen).ok());
  const std::vector<float> hf = reference::ReadFloats(dir / "hf_logits.bin");
  const double error =
      reference::RelativeError(unadopted->logits().data_as<const float>(), hf.data(), hf.size());
  EXPECT_GT(error, 1e-3) << "the flavor's rope and eps should change the logits";
  std::printf("flavor's settings: logits relative error %.3g\n", error);
}

// transformers' conversion of the same weights (permute() on wq/wk, two files, an index, tensors
// in another order) loads into titan exactly as titan's parameters were.
TEST_F(SafetensorsReferenceTest, ImportsTransformersLayoutBitwise) {
  const LlamaConfig config = SmallConfig();
  auto model = SmallModel(config);
  const fs::path dir = root_ / "converted";
  ASSERT_TRUE(Save(dir / "export", ModelPieces(*model), config).ok());
  WriteCase(*model, dir);
  reference::WriteModel(config, *model, kBatch, kSeqLen, dir);
  const std::string command = absl::StrCat("/usr/bin/python3 ", TITAN_SOURCE_DIR,
                                           "/tests/reference/hf_llama_reference.py ", dir.string());
  ASSERT_EQ(std::system(command.c_str()), 0) << "the reference failed: " << command;
  ASSERT_TRUE(fs::exists(dir / "hf_written" / "model.safetensors.index.json"));

  auto imported = SmallModel(config, /*seed=*/5);
  absl::Status status = Load(dir / "hf_written", *imported);
  ASSERT_TRUE(status.ok()) << status;
  for (size_t p = 0; p < model->Parameters().size(); ++p) {
    const TensorView& want = model->Parameters()[p].value;
    const TensorView& got = imported->Parameters()[p].value;
    EXPECT_EQ(0, std::memcmp(want.data, got.data, want.nbytes())) << model->Parameters()[p].name;
  }
}

}  // namespace
}  // namespace titan
