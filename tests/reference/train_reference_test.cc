// titan's training loop against PyTorch (train_reference.py): the same initial weights and
// batches, AdamW with the same hyper-parameters and parameter groups, the same LR schedule with
// warmup, gradient clipping and accumulation; the first 10 steps' losses and gradient norms agree
// to 1e-4 relative.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/recipe.h"
#include "core/train/lr_schedule.h"
#include "core/train/train_step.h"
#include "tests/reference/reference_files.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSteps = 10, kAccumulation = 2, kBatch = 2, kSeqLen = 24, kVocab = 53;
constexpr int64_t kWarmup = 3;
constexpr double kDecayRatio = 0.5, kMinLrFactor = 0.1, kMaxNorm = 1.0;
constexpr const char* kAdamW =
    "[optimizer]\nname = \"adamw\"\nlr = 0.01\nbeta1 = 0.9\nbeta2 = 0.95\neps = 1e-8\n"
    "weight_decay = 0.1\n";

// Text-like batches: a noisy repeating pattern, so the loss falls over the ten steps.
void MakeBatches(std::vector<int32_t>& tokens, std::vector<int32_t>& targets) {
  std::mt19937 random(3);
  const int64_t rows = kSteps * kAccumulation * kBatch;
  std::vector<int32_t> stream(rows * (kSeqLen + 1));
  for (size_t i = 0; i < stream.size(); ++i) {
    stream[i] = random() % 4 == 0 ? static_cast<int32_t>(random() % kVocab)
                                  : static_cast<int32_t>((i * 7) % 11);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* window = &stream[r * (kSeqLen + 1)];
    tokens.insert(tokens.end(), window, window + kSeqLen);
    targets.insert(targets.end(), window + 1, window + kSeqLen + 1);
  }
}

TEST(TrainReferenceTest, FirstTenStepsMatchPyTorch) {
  ASSERT_TRUE(reference::HaveTorch()) << reference::kNoTorch;
  const fs::path dir =
      fs::path(testing::TempDir()) / absl::StrCat("titan_train_reference_", getpid());

  LlamaConfig config;
  config.dim = 32, config.n_layers = 2, config.n_heads = 4, config.n_kv_heads = 2;
  config.vocab_size = kVocab, config.multiple_of = 32;
  auto model = DecoderModel::Create(config, *ParseActivationCheckpoint("selective", "2"));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->Initialize(42).ok());
  reference::WriteModel(config, **model, kBatch, kSeqLen, dir);
  std::ofstream decay(dir / "decay.txt");
  for (const Parameter& p : (*model)->Parameters()) {
    if (p.weight_decay) decay << p.name << "\n";
  }
  decay.close();
  std::vector<int32_t> tokens, targets;
  MakeBatches(tokens, targets);
  reference::WriteBinary(dir / "tokens.bin", tokens.data(), tokens.size());
  reference::WriteBinary(dir / "targets.bin", targets.data(), targets.size());
  std::ofstream(dir / "train.txt")
      << "steps " << kSteps << "\naccumulation " << kAccumulation
      << "\nlr 0.01\nbeta1 0.9\nbeta2 0.95\neps 1e-8\n"
         "weight_decay 0.1\nwarmup_steps "
      << kWarmup << "\ndecay_ratio " << kDecayRatio << "\ndecay_type linear\nmin_lr_factor "
      << kMinLrFactor << "\nmax_norm " << kMaxNorm << "\n";
  const std::string command = absl::StrCat("/usr/bin/python3 ", TITAN_SOURCE_DIR,
                                           "/tests/reference/train_reference.py ", dir.string());
  ASSERT_EQ(std::system(command.c_str()), 0) << "the reference failed: " << command;

  // titan: the adamw plugin configured from a recipe, as titan-run does.
  auto registry = PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR});
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto recipe = ValidateRecipe(*ParseRecipeText(kAdamW, "reference.toml"), **registry);
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  auto optimizer = (*registry)->Create<OptimizerPlugin>("adamw");
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  ASSERT_TRUE((*optimizer)->Configure(recipe->section("optimizer")).ok());
  auto train_step =
      TrainStep::Create(**model, **optimizer, kBatch, kSeqLen, kAccumulation, kMaxNorm);
  ASSERT_TRUE(train_step.ok()) << train_step.status();
  const LrSchedule schedule(kSteps, kWarmup, kDecayRatio, "linear", kMinLrFactor);

  const std::vector<float> ref_losses = reference::ReadFloats(dir / "losses.bin");
  const std::vector<float> ref_norms = reference::ReadFloats(dir / "grad_norms.bin");
  ASSERT_EQ(ref_losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(ref_norms.size(), static_cast<size_t>(kSteps));
  const int64_t n = kBatch * kSeqLen;
  int64_t microbatch = 0;
  double worst_loss = 0, worst_norm = 0;
  bool clipped = false;
  for (int64_t step = 1; step <= kSteps; ++step) {
    auto result = train_step->Run(step, 0.01 * schedule.Factor(step), [&](int32_t* t, int32_t* y) {
      std::copy_n(&tokens[microbatch * n], n, t);
      std::copy_n(&targets[microbatch * n], n, y);
      ++microbatch;
    });
    ASSERT_TRUE(result.ok()) << result.status();
    const float ref_loss = ref_losses[step - 1], ref_norm = ref_norms[step - 1];
    const double loss_error = std::fabs(result->loss - ref_loss) / std::fabs(ref_loss);
    const double norm_error = std::fabs(result->grad_norm - ref_norm) / std::fabs(ref_norm);
    EXPECT_LT(loss_error, 1e-4) << "step " << step << ": " << result->loss << " vs " << ref_loss;
    EXPECT_LT(norm_error, 1e-4) << "step " << step << ": " << result->grad_norm << " vs "
                                << ref_norm;
    worst_loss = std::max(worst_loss, loss_error);
    worst_norm = std::max(worst_norm, norm_error);
    clipped |= ref_norm > kMaxNorm;
    std::printf("step %2ld  loss %.6f (torch %.6f)  grad_norm %.5f (torch %.5f)\n",
                static_cast<long>(step), result->loss, ref_loss, result->grad_norm, ref_norm);
  }
  // The run must exercise what it claims to test: learning and clipping.
  EXPECT_LT(ref_losses.back(), 0.9 * ref_losses.front());
  EXPECT_TRUE(clipped) << "no step's gradient norm exceeded max_norm " << kMaxNorm;
  std::printf("worst relative error over %ld steps: loss %.3g, grad_norm %.3g\n",
              static_cast<long>(kSteps), worst_loss, worst_norm);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace titan
