// The safetensors plugin's Qwen3 and Qwen3-MoE layouts against Hugging Face's models
// (hf_qwen3_reference.py: transformers' Qwen3ForCausalLM and Qwen3MoeForCausalLM written out in
// torch), both ways, in f32: titan's export holds exactly the tensors transformers' model has and
// gives titan's logits within 1e-5 relative error; and a model made in transformers' layout (its
// config.json, two files and an index) imports into titan, which then gives its logits within
// 1e-5. Tied and untied, QK-norm with heads apart from dim / n_heads, experts with a dense first
// layer. With bench/torch-venv made, transformers itself checks both folders too.
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

namespace titan {
namespace {

namespace fs = std::filesystem;
using checkpoint_testing::ModelMetadata;
using checkpoint_testing::ModelPieces;
using checkpoint_testing::SmallModel;
using checkpoint_testing::SmallQwen3Config;

constexpr int64_t kBatch = 2, kSeqLen = 24;

struct Case {
  const char* name;
  LlamaConfig config;
};

std::vector<Case> Cases() {
  LlamaConfig tied = SmallQwen3Config();
  tied.tie_embeddings = true;
  return {{"qwen3", SmallQwen3Config()},
          {"qwen3_tied", tied},
          {"qwen3_moe", SmallQwen3Config(/*experts=*/true, /*dense_layers=*/1)}};
}

class HfQwen3ReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(reference::HaveTorch()) << reference::kNoTorch;
    registry_ = std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value();
    plugin_ = std::move(registry_->Create<CheckpointPlugin>("safetensors")).value();
    root_ = fs::path(testing::TempDir()) / absl::StrCat("titan_hf_qwen3_reference_", getpid());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::unique_ptr<DecoderModel> Model(const LlamaConfig& config, uint64_t seed) {
    return SmallModel(config, seed, Qwen3Family());
  }

  std::vector<int32_t> Tokens(int64_t vocab) {
    std::vector<int32_t> tokens;
    for (int64_t i = 0; i < kBatch * kSeqLen; ++i) {
      tokens.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
    }
    return tokens;
  }

  // Titan's logits for the test's tokens.
  std::vector<float> Logits(DecoderModel& model) {
    const std::vector<int32_t> tokens = Tokens(model.config().vocab_size);
    EXPECT_TRUE(model.Forward(tokens.data(), tokens.data(), kBatch, kSeqLen).ok());
    const float* logits = model.logits().data_as<const float>();
    return std::vector<float>(logits, logits + model.logits().numel());
  }

  // The export, the tokens and titan's logits for them, as hf_qwen3_reference.py reads them.
  void WriteCase(const Case& c, const fs::path& dir) {
    auto model = Model(c.config, 42);
    ASSERT_TRUE(
        plugin_
            ->Save((dir / "export").string(), ModelPieces(*model), ModelMetadata(c.config), comm_)
            .ok());
    const std::vector<int32_t> tokens = Tokens(c.config.vocab_size);
    const std::vector<float> logits = Logits(*model);
    reference::WriteBinary(dir / "tokens.bin", tokens.data(), tokens.size());
    reference::WriteBinary(dir / "titan_logits.bin", logits.data(), logits.size());
    std::FILE* file = std::fopen((dir / "case.txt").c_str(), "w");
    std::fprintf(file, "batch %ld\nseq_len %ld\n", kBatch, kSeqLen);
    std::fclose(file);
  }

  // The logits titan gives for the Hugging Face folder it imports as titan-run does: the folder's
  // config adopted (norm_eps and RoPE the case's), then its tensors loaded.
  std::vector<float> ImportedLogits(const Case& c, const fs::path& folder) {
    absl::StatusOr<CheckpointContents> contents = plugin_->Read(folder.string());
    EXPECT_TRUE(contents.ok()) << contents.status();
    if (!contents.ok()) return {};
    LlamaConfig config = c.config;
    absl::StatusOr<std::vector<std::string>> adopted =
        AdoptCheckpointModel(contents->metadata, folder.string(), c.name, config);
    EXPECT_TRUE(adopted.ok()) << adopted.status();
    if (!adopted.ok()) return {};
    EXPECT_TRUE(adopted->empty()) << folder << ": the same norm_eps and RoPE";
    auto imported = Model(config, /*seed=*/5);
    std::vector<CheckpointPiece> pieces = ModelPieces(*imported);
    absl::Status loaded = plugin_->Load(folder.string(), pieces, comm_);
    EXPECT_TRUE(loaded.ok()) << loaded;
    return loaded.ok() ? Logits(*imported) : std::vector<float>{};
  }

  // Every case's folder, filled by the reference script; case_dirs_ lists them.
  void WriteCasesAndRunReference(const std::vector<Case>& cases) {
    std::string command = absl::StrCat("/usr/bin/python3 ", TITAN_SOURCE_DIR,
                                       "/tests/reference/hf_qwen3_reference.py");
    for (const Case& c : cases) {
      fs::create_directories(root_ / c.name);
      WriteCase(c, root_ / c.name);
      absl::StrAppend(&case_dirs_, " ", (root_ / c.name).string());
    }
    ASSERT_EQ(std::system((command + case_dirs_).c_str()), 0)
        << "the reference failed: " << command << case_dirs_;
  }

  std::string case_dirs_;
  std::unique_ptr<PluginRegistry> registry_;
  std::unique_ptr<CheckpointPlugin> plugin_;
  SingleProcessCommunicator comm_;
  fs::path root_;
};

TEST_F(HfQwen3ReferenceTest, ExportsAndImportsMatchHuggingFaceLogits) {
  const std::vector<Case> cases = Cases();
  WriteCasesAndRunReference(cases);
  if (HasFatalFailure()) return;

  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path dir = root_ / c.name;
    const size_t count = static_cast<size_t>(kBatch * kSeqLen * c.config.vocab_size);
    // titan -> Hugging Face (the reference also checks this, and the tensors' names).
    const std::vector<float> titan = reference::ReadFloats(dir / "titan_logits.bin");
    const std::vector<float> hf = reference::ReadFloats(dir / "hf_logits.bin");
    ASSERT_EQ(hf.size(), count);
    const double exported = reference::RelativeError(titan.data(), hf.data(), count);
    EXPECT_LT(exported, 1e-5);

    // Hugging Face -> titan: the model made in transformers' layout, as titan-run imports it.
    const std::vector<float> ours = ImportedLogits(c, dir / "hf_made");
    const std::vector<float> theirs = reference::ReadFloats(dir / "hf_made_logits.bin");
    ASSERT_EQ(theirs.size(), count);
    const double importing = reference::RelativeError(ours.data(), theirs.data(), count);
    EXPECT_LT(importing, 1e-5);
    std::printf("%-10s export %.3g, import %.3g (logits relative error)\n", c.name, exported,
                importing);
  }
}

// The same folders against transformers itself (bench/torch-venv's): titan's export and the model
// made in transformers' layout (which the test above imports) load into Qwen3ForCausalLM and
// Qwen3MoeForCausalLM with no tensor missing or unexpected and no warning, and give the logits
// titan gives for them within 1e-5; and what transformers' save_pretrained writes of the made
// model (transformers 5's config keys) imports into titan with its logits within 1e-5.
TEST_F(HfQwen3ReferenceTest, TransformersItselfLoadsBothWaysAndAgrees) {
  const std::string python = reference::TransformersPython();
  if (python.empty()) GTEST_SKIP() << reference::kNoTransformers;
  WriteCasesAndRunReference(Cases());
  if (HasFatalFailure()) return;
  ASSERT_TRUE(reference::TransformersAgree(python, case_dirs_));
  // transformers -> titan: the folder transformers' save_pretrained wrote.
  for (const Case& c : Cases()) {
    const fs::path dir = root_ / c.name;
    const std::vector<float> ours = ImportedLogits(c, dir / "tf_saved");
    const std::vector<float> theirs = reference::ReadFloats(dir / "tf_saved_logits.bin");
    ASSERT_EQ(ours.size(), theirs.size()) << c.name;
    const double error = reference::RelativeError(ours.data(), theirs.data(), ours.size());
    EXPECT_LT(error, 1e-5) << c.name;
    std::printf("%-18s transformers' save_pretrained imported: %.3g (logits relative error)\n",
                c.name, error);
  }
}

}  // namespace
}  // namespace titan
