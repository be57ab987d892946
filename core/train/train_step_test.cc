#include "core/train/train_step.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_compute.h"
#include "core/cpu/cpu_device.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/recipe.h"
#include "core/tensor/arena_file.h"

namespace titan {
namespace {

// ClipGradNorm on host vectors through the CPU compute.
double Clip(std::vector<float>& grads, double max_norm) {
  std::vector<float> scratch(2);
  return *ClipGradNorm(CpuCompute::Get(), FlatF32(grads.data(), 2), FlatF32(scratch.data(), 2),
                       max_norm);
}

TEST(ClipGradNorm, ScalesToMaxNormAndReportsTheNormBefore) {
  std::vector<float> g = {3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(Clip(g, 1.0), 5.0);
  EXPECT_NEAR(std::hypot(g[0], g[1]), 1.0, 1e-6);
  std::vector<float> small = {0.3f, 0.4f};
  EXPECT_NEAR(Clip(small, 1.0), 0.5, 1e-7);
  EXPECT_FLOAT_EQ(small[0], 0.3f);  // below max_norm: untouched
  std::vector<float> bad = {NAN, 1.0f};
  EXPECT_FALSE(std::isfinite(Clip(bad, 1.0)));
}

constexpr int64_t kSeqLen = 9, kVocab = 43;

std::unique_ptr<DecoderModel> TinyModel() {
  LlamaConfig config;
  config.dim = 16, config.n_layers = 1, config.n_heads = 2, config.n_kv_heads = 1;
  config.vocab_size = kVocab, config.multiple_of = 16;
  auto model = DecoderModel::Create(config, *ParseActivationCheckpoint("none", ""));
  EXPECT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->Initialize(5).ok());
  return std::move(*model);
}

struct LoadedAdamW {
  std::unique_ptr<PluginRegistry> registry;
  std::unique_ptr<OptimizerPlugin> optimizer;
};

LoadedAdamW AdamW() {
  LoadedAdamW setup;
  setup.registry = std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value();
  auto raw = ParseRecipeText("[optimizer]\nname = \"adamw\"\nlr = 0.01\n", "test.toml");
  auto recipe = ValidateRecipe(*raw, *setup.registry);
  EXPECT_TRUE(recipe.ok()) << recipe.status();
  setup.optimizer = std::move(setup.registry->Create<OptimizerPlugin>("adamw")).value();
  EXPECT_TRUE(setup.optimizer->Configure(recipe->section("optimizer")).ok());
  return setup;
}

// Sequence `row` of a fixed pseudo-random corpus.
void FillRows(int64_t first_row, int64_t rows, int32_t* tokens, int32_t* targets) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < kSeqLen; ++t) {
      const int64_t i = (first_row + r) * kSeqLen + t;
      tokens[r * kSeqLen + t] = static_cast<int32_t>((i * 31 + 7) % kVocab);
      targets[r * kSeqLen + t] = static_cast<int32_t>((i * 17 + 3) % kVocab);
    }
  }
}

std::vector<float> Params(const DecoderModel& model) {
  const float* p = model.params().flat_data();
  return std::vector<float>(p, p + model.params().flat_size());
}

// The CPU under another name: host memory and the CPU's kernels, reporting itself as cuda, so the
// device checks can be seen without a GPU. `kernels` false: a device that only allocates.
class PretendCudaCompute : public CpuCompute {
 public:
  Device device() const override { return Device{DeviceType::kCuda, 0}; }
};
class PretendCudaDevice : public CpuDevice {
 public:
  explicit PretendCudaDevice(bool kernels) : kernels_(kernels) {}
  DeviceType type() const override { return DeviceType::kCuda; }
  Compute* compute() override { return kernels_ ? &compute_ : nullptr; }

 private:
  bool kernels_;
  PretendCudaCompute compute_;
};

// An optimizer written for host buffers, as third-party plugins were before the compute
// interface: it keeps SupportsDevice's default (the CPU only).
class HostOnlyOptimizer : public OptimizerPlugin {
 public:
  std::vector<std::string> StateNames() const override { return {}; }
  absl::Status Step(const OptimizerStep&) override { return absl::OkStatus(); }
};

TEST(TrainStep, AHostOnlyOptimizerIsRefusedOnAnotherDeviceAndRunsOnTheCpu) {
  LlamaConfig config;
  config.dim = 16, config.n_layers = 1, config.n_heads = 2, config.n_kv_heads = 1;
  config.vocab_size = kVocab, config.multiple_of = 16;
  PretendCudaDevice cuda(/*kernels=*/true);
  auto on_cuda = DecoderModel::Create(config, {}, ModelCompute{&cuda, DType::kF32});
  ASSERT_TRUE(on_cuda.ok()) << on_cuda.status();
  EXPECT_EQ((*on_cuda)->params().at(0).view().device.type, DeviceType::kCuda);
  HostOnlyOptimizer host_only;
  auto refused = TrainStep::Create(**on_cuda, host_only, 1, kSeqLen, 1, 1.0);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              testing::HasSubstr("runs on the cpu only, but the model computes on cuda"));
  EXPECT_TRUE(TrainStep::Create(*TinyModel(), host_only, 1, kSeqLen, 1, 1.0).ok());
  LoadedAdamW adamw = AdamW();
  EXPECT_TRUE(TrainStep::Create(**on_cuda, *adamw.optimizer, 1, kSeqLen, 1, 1.0).ok());
}

TEST(TrainStep, AModelOnADeviceWithoutKernelsIsRefused) {
  PretendCudaDevice no_kernels(/*kernels=*/false);
  LlamaConfig config;
  config.dim = 16, config.n_layers = 1, config.n_heads = 2, config.n_kv_heads = 1;
  auto model = DecoderModel::Create(config, {}, ModelCompute{&no_kernels, DType::kF32});
  EXPECT_EQ(model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(model.status().message(), testing::HasSubstr("implements no compute kernels"));
}

TEST(TrainStep, AccumulationOfTwoEqualsOneStepOnTheDoubledBatch) {
  LoadedAdamW opt_a = AdamW(), opt_b = AdamW();
  std::unique_ptr<DecoderModel> accumulated = TinyModel(), doubled = TinyModel();
  auto step_a = TrainStep::Create(*accumulated, *opt_a.optimizer, 2, kSeqLen, 2, 1.0);
  auto step_b = TrainStep::Create(*doubled, *opt_b.optimizer, 4, kSeqLen, 1, 1.0);
  ASSERT_TRUE(step_a.ok() && step_b.ok());
  for (int64_t step = 1; step <= 2; ++step) {
    int64_t row = (step - 1) * 4;
    auto a = step_a->Run(step, 0.01, [&](int32_t* tokens, int32_t* targets) {
      FillRows(row, 2, tokens, targets);
      row += 2;
    });
    auto b = step_b->Run(step, 0.01, [&](int32_t* tokens, int32_t* targets) {
      FillRows((step - 1) * 4, 4, tokens, targets);
    });
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_NEAR(a->loss, b->loss, 1e-6 * b->loss);
    EXPECT_NEAR(a->grad_norm, b->grad_norm, 1e-5 * b->grad_norm);
  }
  const std::vector<float> pa = Params(*accumulated), pb = Params(*doubled);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    diff += std::pow(pa[i] - pb[i], 2.0);
    norm += std::pow(pb[i], 2.0);
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-6);
  // The optimizer state moved too, and identically.
  const Arena& sa = step_a->optimizer_state();
  ASSERT_EQ(sa.size(), 2);
  EXPECT_EQ(sa.name(0), "exp_avg");
  EXPECT_NE(sa.at(1).data<float>()[0], 0.0f);
}

TEST(TrainStep, SavedOptimizerStateAndParametersResumeExactly) {
  const std::string dir = testing::TempDir();
  const std::string state_path = absl::StrCat(dir, "/titan_opt_", getpid(), ".bin");
  const std::string params_path = absl::StrCat(dir, "/titan_params_", getpid(), ".bin");
  auto next = [](int32_t* tokens, int32_t* targets) { FillRows(3, 2, tokens, targets); };
  LoadedAdamW opt_a = AdamW(), opt_b = AdamW();
  std::unique_ptr<DecoderModel> original = TinyModel(), resumed = TinyModel();
  auto a = TrainStep::Create(*original, *opt_a.optimizer, 2, kSeqLen, 1, 1.0);
  auto b = TrainStep::Create(*resumed, *opt_b.optimizer, 2, kSeqLen, 1, 1.0);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t step = 1; step <= 2; ++step) ASSERT_TRUE(a->Run(step, 0.01, next).ok());
  ASSERT_TRUE(WriteArena(a->optimizer_state(), state_path).ok());
  ASSERT_TRUE(WriteArena(original->params(), params_path).ok());
  ASSERT_TRUE(ReadArena(state_path, b->optimizer_state()).ok());
  ASSERT_TRUE(ReadArena(params_path, resumed->params()).ok());
  // Step 3 from the restored state is bit-identical to step 3 of the uninterrupted run; without
  // the moments it would differ (Adam's update depends on them).
  ASSERT_TRUE(a->Run(3, 0.01, next).ok());
  ASSERT_TRUE(b->Run(3, 0.01, next).ok());
  const std::vector<float> pa = Params(*original), pb = Params(*resumed);
  EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size() * sizeof(float)), 0);
  std::filesystem::remove(state_path);
  std::filesystem::remove(params_path);
}

TEST(TrainStep, NonFiniteLossStopsNamingTheStep) {
  LoadedAdamW opt = AdamW();
  std::unique_ptr<DecoderModel> model = TinyModel();
  auto step = TrainStep::Create(*model, *opt.optimizer, 1, kSeqLen, 1, 1.0);
  ASSERT_TRUE(step.ok());
  auto next = [](int32_t* tokens, int32_t* targets) { FillRows(0, 1, tokens, targets); };
  ASSERT_TRUE(step->Run(1, 0.01, next).ok());
  model->params().flat_data()[0] = std::numeric_limits<float>::infinity();
  model->params().at(1).data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> before = Params(*model);
  auto result = step->Run(2, 0.01, next);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("step 2: the loss is nan"), std::string::npos)
      << result.status();
  EXPECT_EQ(std::memcmp(before.data(), Params(*model).data(), before.size() * 4), 0);
}

// An lr that is not finite in f32 would turn the weights to inf and be reported as the next
// step's NaN loss: it is named itself, before the optimizer touches anything.
TEST(TrainStep, ANonFiniteLearningRateIsNamedBeforeTheOptimizerRuns) {
  LoadedAdamW opt = AdamW();
  std::unique_ptr<DecoderModel> model = TinyModel();
  auto step = TrainStep::Create(*model, *opt.optimizer, 1, kSeqLen, 1, 1.0);
  ASSERT_TRUE(step.ok());
  int64_t batches = 0;
  auto next = [&](int32_t* tokens, int32_t* targets) {
    ++batches, FillRows(0, 1, tokens, targets);
  };
  const std::vector<float> before = Params(*model);
  for (double lr :
       {std::numeric_limits<double>::infinity(), 1e39, std::numeric_limits<double>::quiet_NaN()}) {
    auto result = step->Run(1, lr, next);
    ASSERT_FALSE(result.ok()) << lr;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(result.status().message().rfind(absl::StrCat("step 1: the learning rate is ", lr,
                                                           " (optimizer.lr x the lr_scheduler"),
                                              0),
              0u)
        << result.status();
  }
  EXPECT_EQ(batches, 0);
  EXPECT_EQ(std::memcmp(before.data(), Params(*model).data(), before.size() * 4), 0);
  // 1e30 fits in f32: the step runs.
  EXPECT_TRUE(step->Run(1, 1e30, next).ok());
}

// A finite loss whose gradient is not finite: the final norm's weight is 0 in dimension 0, so
// the output weight's column 0 never reaches the logits (the loss is about ln 43) however large
// it is; but d(loss)/d(norm.weight[0]) = sum over tokens of d(normed[0]) * x_hat[0], where
// d(normed[0]) = (1/N) * sum_v (p_v - [v = target]) * output[v][0]. With that column at +-FLT_MAX
// (-FLT_MAX for the batch's targets) and embeddings that make x_hat[0] about sqrt(dim) = 4, the
// true gradient is about 6 x FLT_MAX: not representable in float32.
TEST(TrainStep, NonFiniteGradientWithAFiniteLossStopsAndLeavesTheParameters) {
  LoadedAdamW opt = AdamW();
  std::unique_ptr<DecoderModel> model = TinyModel();
  auto step = TrainStep::Create(*model, *opt.optimizer, 1, kSeqLen, 1, 1.0);
  ASSERT_TRUE(step.ok());
  std::vector<int32_t> tokens(kSeqLen), targets(kSeqLen);
  FillRows(0, 1, tokens.data(), targets.data());
  auto next = [&](int32_t* t, int32_t* y) {
    std::copy(tokens.begin(), tokens.end(), t);
    std::copy(targets.begin(), targets.end(), y);
  };
  ASSERT_TRUE(step->Run(1, 0.01, next).ok());

  const int64_t dim = model->config().dim;
  float* embeddings = model->params().Find("tok_embeddings.weight")->data<float>();
  float* norm = model->params().Find("norm.weight")->data<float>();
  float* output = model->params().Find("output.weight")->data<float>();
  norm[0] = 0.0f;
  for (int64_t v = 0; v < kVocab; ++v) {
    embeddings[v * dim] = 1000.0f;
    const bool target = std::find(targets.begin(), targets.end(), v) != targets.end();
    output[v * dim] =
        target ? -std::numeric_limits<float>::max() : std::numeric_limits<float>::max();
  }
  auto loss = model->Forward(tokens.data(), targets.data(), 1, kSeqLen);
  ASSERT_TRUE(loss.ok());
  ASSERT_TRUE(std::isfinite(*loss)) << "the forward pass must stay finite, found " << *loss;
  EXPECT_NEAR(*loss, std::log(43.0), 0.1);

  const std::vector<float> params = Params(*model);
  const Arena& state = step->optimizer_state();
  const std::vector<float> moments(state.flat_data(), state.flat_data() + state.flat_size());
  auto result = step->Run(2, 0.01, next);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("step 2: the gradient norm is inf"), std::string::npos)
      << result.status();
  EXPECT_EQ(std::memcmp(params.data(), Params(*model).data(), params.size() * 4), 0);
  EXPECT_EQ(std::memcmp(moments.data(), state.flat_data(), moments.size() * 4), 0);
}

}  // namespace
}  // namespace titan
