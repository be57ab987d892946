// The safetensors plugin's DeepSeek-V3 layout against Hugging Face's model
// (hf_deepseek_v3_reference.py: transformers' DeepseekV3ForCausalLM written out in torch), both
// ways, in f32: titan's export of the debug flavors (low-rank and plain queries, YaRN, norm_eps
// 1e-5 where transformers' latent norms keep 1e-6, a dense first layer, grouped sigmoid routing
// with a bias, shared experts, a route scale) holds exactly the tensors transformers' model has
// and gives titan's logits within 1e-5 relative error; and a model made in transformers' layout
// (DeepSeek's own config.json form, rope_interleave true and false, two files and an index)
// imports into titan, which then gives its logits within 1e-5.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
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

constexpr int64_t kBatch = 2, kSeqLen = 24;

struct Case {
  const char* name;  // the flavor
  bool hf_made_rope_interleave;
};

const Case kCases[] = {{"debugmodel", false}, {"debugmodel_plain_q", true}};

class HfDeepseekV3ReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(reference::HaveTorch()) << reference::kNoTorch;
    registry_ = std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value();
    plugin_ = std::move(registry_->Create<CheckpointPlugin>("safetensors")).value();
    root_ =
        fs::path(testing::TempDir()) / absl::StrCat("titan_hf_deepseek_v3_reference_", getpid());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // SmallModel's values, with the router's logits of order 1 (sigmoid scores of far larger ones
  // would all be near 1, too close to choose by); the experts' bias small and positive: it
  // changes the choice, and every chosen expert's score stays positive (transformers masks the
  // groups passed over with 0, titan leaves them out); and the latents before q_norm and kv_norm
  // small, their mean square near norm_eps, so that transformers' latent norms' epsilon of 1e-6
  // would show if the export did not make up for it.
  std::unique_ptr<DecoderModel> Model(const LlamaConfig& config, uint64_t seed) {
    auto model = SmallModel(config, seed, DeepSeekV3Family());
    const Arena& params = model->params();
    const int64_t latent = config.mla.kv_lora_rank * config.dim;  // wkv_a's rows before k_pe
    for (int i = 0; i < params.size(); ++i) {
      const std::string& name = params.name(i);
      const bool router = name.find(".router.") != std::string::npos;
      const bool bias = name.find("expert_bias") != std::string::npos;
      const bool q_a = name.find(".wq_a.") != std::string::npos;
      const bool kv_a = name.find(".wkv_a.") != std::string::npos;
      float* w = params.at(i).data<float>();
      for (int64_t j = 0; j < params.at(i).numel(); ++j) {
        if (router) w[j] /= 8.0f;
        if (bias) w[j] = 0.02f * (1.0f + std::sin(3.0f * static_cast<float>(j + i)));
        if (q_a || (kv_a && j < latent)) w[j] *= 0.01f;
      }
    }
    return model;
  }

  static LlamaConfig ConfigOf(const Case& c) { return *DeepSeekV3Family().Flavor(c.name); }

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
    const LlamaConfig config = ConfigOf(c);
    auto model = Model(config, 42);
    absl::Status saved =
        plugin_->Save((dir / "export").string(), ModelPieces(*model), ModelMetadata(config), comm_);
    ASSERT_TRUE(saved.ok()) << saved;
    const std::vector<int32_t> tokens = Tokens(config.vocab_size);
    const std::vector<float> logits = Logits(*model);
    reference::WriteBinary(dir / "tokens.bin", tokens.data(), tokens.size());
    reference::WriteBinary(dir / "titan_logits.bin", logits.data(), logits.size());
    std::FILE* file = std::fopen((dir / "case.txt").c_str(), "w");
    std::fprintf(file, "batch %ld\nseq_len %ld\nhf_made_rope_interleave %d\n", kBatch, kSeqLen,
                 c.hf_made_rope_interleave ? 1 : 0);
    std::fclose(file);
  }

  // The logits titan gives for the Hugging Face folder it imports as titan-run does: the folder's
  // config adopted (norm_eps, RoPE and YaRN the case's), then its tensors loaded.
  std::vector<float> ImportedLogits(const Case& c, const fs::path& folder) {
    absl::StatusOr<CheckpointContents> contents = plugin_->Read(folder.string());
    EXPECT_TRUE(contents.ok()) << contents.status();
    if (!contents.ok()) return {};
    LlamaConfig config = ConfigOf(c);
    absl::StatusOr<std::vector<std::string>> adopted =
        AdoptCheckpointModel(contents->metadata, folder.string(), c.name, config);
    EXPECT_TRUE(adopted.ok()) << adopted.status();
    if (!adopted.ok()) return {};
    EXPECT_TRUE(adopted->empty()) << folder << ": the same norm_eps, RoPE and YaRN";
    auto imported = Model(config, /*seed=*/5);
    std::vector<CheckpointPiece> pieces = ModelPieces(*imported);
    absl::Status loaded = plugin_->Load(folder.string(), pieces, comm_);
    EXPECT_TRUE(loaded.ok()) << loaded;
    return loaded.ok() ? Logits(*imported) : std::vector<float>{};
  }

  // Every case's folder, filled by the reference script; case_dirs_ lists them.
  void WriteCasesAndRunReference() {
    std::string command = absl::StrCat("/usr/bin/python3 ", TITAN_SOURCE_DIR,
                                       "/tests/reference/hf_deepseek_v3_reference.py");
    for (const Case& c : kCases) {
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

TEST_F(HfDeepseekV3ReferenceTest, ExportsAndImportsMatchHuggingFaceLogits) {
  WriteCasesAndRunReference();
  if (HasFatalFailure()) return;

  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const fs::path dir = root_ / c.name;
    const LlamaConfig flavor = ConfigOf(c);
    const size_t count = static_cast<size_t>(kBatch * kSeqLen * flavor.vocab_size);
    // titan -> Hugging Face (the reference also checks this, and the tensors' names).
    const std::vector<float> titan = reference::ReadFloats(dir / "titan_logits.bin");
    const std::vector<float> hf = reference::ReadFloats(dir / "hf_logits.bin");
    ASSERT_EQ(hf.size(), count);
    const double exported = reference::RelativeError(titan.data(), hf.data(), count);
    EXPECT_LT(exported, 1e-5);

    // Hugging Face -> titan: the model made in transformers' layout, as titan-run imports it
    // (the experts' bias from e_score_correction_bias).
    const std::vector<float> ours = ImportedLogits(c, dir / "hf_made");
    const std::vector<float> theirs = reference::ReadFloats(dir / "hf_made_logits.bin");
    ASSERT_EQ(theirs.size(), count);
    const double importing = reference::RelativeError(ours.data(), theirs.data(), count);
    EXPECT_LT(importing, 1e-5);
    std::printf("%-18s export %.3g, import %.3g (logits relative error)\n", c.name, exported,
                importing);
  }
}

// The same folders against transformers itself (bench/torch-venv's DeepseekV3ForCausalLM): titan's
// export and the models made in transformers' and DeepSeek's layouts load with no tensor missing
// or unexpected and no warning, and give the logits titan gives for them within 1e-5; and what
// transformers' save_pretrained writes of the made model imports into titan within 1e-5.
TEST_F(HfDeepseekV3ReferenceTest, TransformersItselfLoadsBothWaysAndAgrees) {
  const std::string python = reference::TransformersPython();
  if (python.empty()) GTEST_SKIP() << reference::kNoTransformers;
  WriteCasesAndRunReference();
  if (HasFatalFailure()) return;
  ASSERT_TRUE(reference::TransformersAgree(python, case_dirs_));
  // transformers -> titan: the folder transformers' save_pretrained wrote.
  for (const Case& c : kCases) {
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
