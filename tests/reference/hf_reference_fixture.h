// What the Hugging Face reference tests of the model families share (hf_qwen3_reference_test.cc,
// hf_deepseek_v3_reference_test.cc): each case's titan export with the tokens and titan's logits
// for them, the family's reference script run over every case's folder (it writes Hugging Face's
// logits for the export, a model made in transformers' layout and its logits), titan's logits for
// the folders the script makes, imported as titan-run imports them, and the two checks each
// family makes: against the script's models, and against transformers itself.
#ifndef TITAN_TESTS_REFERENCE_HF_REFERENCE_FIXTURE_H_
#define TITAN_TESTS_REFERENCE_HF_REFERENCE_FIXTURE_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/model/config.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/single_process_comm.h"
#include "tests/checkpoint/model_checkpoint.h"
#include "tests/reference/reference_files.h"

namespace titan::reference {

struct HfCase {
  std::string name;  // the case's folder, and the flavor messages name
  LlamaConfig config;
  std::string script_lines;  // further "key value" lines of case.txt for the script
};

class HfReferenceTest : public ::testing::Test {
 protected:
  static constexpr int64_t kBatch = 2, kSeqLen = 24;

  // `script`: the family's reference in tests/reference/.
  HfReferenceTest(std::string script, const ModelFamily& family)
      : script_(std::move(script)), family_(family) {}

  void SetUp() override {
    ASSERT_TRUE(HaveTorch()) << kNoTorch;
    registry_ = std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value();
    plugin_ = std::move(registry_->Create<CheckpointPlugin>("safetensors")).value();
    root_ = std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("titan_", std::filesystem::path(script_).stem().string(), "_", getpid());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // A model of `config` with weights drawn from `seed`; a family may shape them for its
  // reference.
  virtual std::unique_ptr<DecoderModel> Model(const LlamaConfig& config, uint64_t seed) {
    return checkpoint_testing::SmallModel(config, seed, family_);
  }

  // Both ways, in f32: titan's export gives, in the script's Hugging Face model, titan's logits
  // within 1e-5 relative error (the script also checks the tensors' names), and the model the
  // script made in transformers' layout imports into titan, which then gives its logits within
  // 1e-5.
  void ExpectExportsAndImportsMatch(const std::vector<HfCase>& cases) {
    WriteCasesAndRunReference(cases);
    if (HasFatalFailure()) return;
    for (const HfCase& c : cases) {
      SCOPED_TRACE(c.name);
      const std::filesystem::path dir = root_ / c.name;
      const size_t count = static_cast<size_t>(kBatch * kSeqLen * c.config.vocab_size);
      const std::vector<float> titan = ReadFloats(dir / "titan_logits.bin");
      const std::vector<float> hf = ReadFloats(dir / "hf_logits.bin");
      ASSERT_EQ(hf.size(), count);
      const double exported = RelativeError(titan.data(), hf.data(), count);
      EXPECT_LT(exported, 1e-5);
      const std::vector<float> ours = ImportedLogits(c, dir / "hf_made");
      const std::vector<float> theirs = ReadFloats(dir / "hf_made_logits.bin");
      ASSERT_EQ(theirs.size(), count);
      const double importing = RelativeError(ours.data(), theirs.data(), count);
      EXPECT_LT(importing, 1e-5);
      std::printf("%-18s export %.3g, import %.3g (logits relative error)\n", c.name.c_str(),
                  exported, importing);
    }
  }

  // The same folders against transformers itself (bench/torch-venv's), skipped without it: the
  // export and the made model load into AutoModelForCausalLM with no tensor missing or unexpected
  // and no warning, and give titan's logits within 1e-5 (hf_transformers_check.py); and what
  // transformers' save_pretrained writes of the made model imports into titan within 1e-5.
  void ExpectTransformersAgree(const std::vector<HfCase>& cases) {
    const std::string python = TransformersPython();
    if (python.empty()) GTEST_SKIP() << kNoTransformers;
    WriteCasesAndRunReference(cases);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(TransformersAgree(python, case_dirs_));
    for (const HfCase& c : cases) {
      const std::filesystem::path dir = root_ / c.name;
      const std::vector<float> ours = ImportedLogits(c, dir / "tf_saved");
      const std::vector<float> theirs = ReadFloats(dir / "tf_saved_logits.bin");
      ASSERT_EQ(ours.size(), theirs.size()) << c.name;
      const double error = RelativeError(ours.data(), theirs.data(), ours.size());
      EXPECT_LT(error, 1e-5) << c.name;
      std::printf("%-18s transformers' save_pretrained imported: %.3g (logits relative error)\n",
                  c.name.c_str(), error);
    }
  }

 private:
  std::vector<int32_t> Tokens(int64_t vocab) const {
    std::vector<int32_t> tokens;
    for (int64_t i = 0; i < kBatch * kSeqLen; ++i) {
      tokens.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
    }
    return tokens;
  }

  // Titan's logits for the test's tokens.
  std::vector<float> Logits(DecoderModel& model) const {
    const std::vector<int32_t> tokens = Tokens(model.config().vocab_size);
    EXPECT_TRUE(model.Forward(tokens.data(), tokens.data(), kBatch, kSeqLen).ok());
    const float* logits = model.logits().data_as<const float>();
    return std::vector<float>(logits, logits + model.logits().numel());
  }

  // The export, the tokens and titan's logits for them, and case.txt, as the script reads them.
  void WriteCase(const HfCase& c, const std::filesystem::path& dir) {
    auto model = Model(c.config, 42);
    absl::Status saved =
        plugin_->Save((dir / "export").string(), checkpoint_testing::ModelPieces(*model),
                      checkpoint_testing::ModelMetadata(c.config), comm_);
    ASSERT_TRUE(saved.ok()) << saved;
    const std::vector<int32_t> tokens = Tokens(c.config.vocab_size);
    const std::vector<float> logits = Logits(*model);
    WriteBinary(dir / "tokens.bin", tokens.data(), tokens.size());
    WriteBinary(dir / "titan_logits.bin", logits.data(), logits.size());
    std::FILE* file = std::fopen((dir / "case.txt").c_str(), "w");
    std::fprintf(file, "batch %ld\nseq_len %ld\n%s", kBatch, kSeqLen, c.script_lines.c_str());
    std::fclose(file);
  }

  // The logits titan gives for a Hugging Face folder imported as titan-run imports it: the
  // folder's config adopted (its norm_eps and RoPE settings are the case's), then its tensors.
  std::vector<float> ImportedLogits(const HfCase& c, const std::filesystem::path& folder) {
    absl::StatusOr<CheckpointContents> contents = plugin_->Read(folder.string());
    EXPECT_TRUE(contents.ok()) << contents.status();
    if (!contents.ok()) return {};
    LlamaConfig config = c.config;
    absl::StatusOr<std::vector<std::string>> adopted =
        AdoptCheckpointModel(contents->metadata, folder.string(), c.name, config);
    EXPECT_TRUE(adopted.ok()) << adopted.status();
    if (!adopted.ok()) return {};
    EXPECT_TRUE(adopted->empty()) << folder << ": the case's norm_eps and RoPE settings";
    auto imported = Model(config, /*seed=*/5);
    std::vector<CheckpointPiece> pieces = checkpoint_testing::ModelPieces(*imported);
    absl::Status loaded = plugin_->Load(folder.string(), pieces, comm_);
    EXPECT_TRUE(loaded.ok()) << loaded;
    return loaded.ok() ? Logits(*imported) : std::vector<float>{};
  }

  // Every case's folder, filled by the reference script; case_dirs_ lists them.
  void WriteCasesAndRunReference(const std::vector<HfCase>& cases) {
    const std::string command =
        absl::StrCat("/usr/bin/python3 ", TITAN_SOURCE_DIR, "/tests/reference/", script_);
    case_dirs_.clear();
    for (const HfCase& c : cases) {
      std::filesystem::create_directories(root_ / c.name);
      WriteCase(c, root_ / c.name);
      absl::StrAppend(&case_dirs_, " ", (root_ / c.name).string());
    }
    ASSERT_EQ(std::system((command + case_dirs_).c_str()), 0)
        << "the reference failed: " << command << case_dirs_;
  }

  const std::string script_;
  const ModelFamily& family_;
  std::string case_dirs_;
  std::unique_ptr<PluginRegistry> registry_;
  std::unique_ptr<CheckpointPlugin> plugin_;
  SingleProcessCommunicator comm_;
  std::filesystem::path root_;
};

}  // namespace titan::reference

#endif  // TITAN_TESTS_REFERENCE_HF_REFERENCE_FIXTURE_H_
