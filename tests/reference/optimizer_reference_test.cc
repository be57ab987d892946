// Each optimizer plugin against torch.optim over 10 steps: the same initial parameters,
// gradients and per-step learning rates, weight decay on part of the parameters. The
// parameters after 10 steps must match to 1e-6 relative.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_compute.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/recipe.h"
#include "tests/reference/reference_files.h"
#include "titan/optimizer.h"

namespace titan::reference {
namespace {

struct OptimizerCase {
  std::string name;
  std::string recipe;     // the [optimizer] section
  std::string reference;  // optimizer.txt hyper-parameters
};

// Names each case by its optimizer (test names stay the same from one build to the next).
void PrintTo(const OptimizerCase& c, std::ostream* out) { *out << c.name; }

class OptimizerReferenceTest : public ::testing::TestWithParam<OptimizerCase> {};

TEST_P(OptimizerReferenceTest, MatchesTorchOptimOverTenSteps) {
  if (!HaveTorch()) FAIL() << kNoTorch;
  const OptimizerCase& c = GetParam();
  auto registry = PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR});
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto raw = ParseRecipeText("[optimizer]\n" + c.recipe, "test.toml");
  ASSERT_TRUE(raw.ok()) << raw.status();
  auto recipe = ValidateRecipe(*raw, **registry);
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  auto optimizer = (*registry)->Create<OptimizerPlugin>(c.name);
  ASSERT_TRUE(optimizer.ok());
  ASSERT_TRUE((*optimizer)->Configure(recipe->section("optimizer")).ok());

  constexpr int kSteps = 10;
  constexpr int kN = 301;
  constexpr int kDecayed = 200;  // the first kDecayed parameters get weight decay
  std::mt19937 random(17);
  std::normal_distribution<float> normal;
  std::vector<float> params(kN), grads(static_cast<size_t>(kSteps) * kN);
  for (float& p : params) p = normal(random);
  for (float& g : grads) g = normal(random) * 0.1f;
  std::vector<double> lrs;
  for (int t = 0; t < kSteps; ++t) lrs.push_back(0.01 * (t + 1) / kSteps);  // a warmup
  std::vector<uint8_t> decay(kN, 0);
  std::fill(decay.begin(), decay.begin() + kDecayed, 1);

  const fs::path dir = fs::path(::testing::TempDir()) / ("optimizer_reference_" + c.name);
  fs::create_directories(dir);
  std::ofstream(dir / "optimizer.txt")
      << "name " << c.name << "\nsteps " << kSteps << "\nn " << kN << "\n"
      << c.reference;
  WriteBinary(dir / "params.bin", params.data(), params.size());
  WriteBinary(dir / "decay.bin", decay.data(), decay.size());
  WriteBinary(dir / "grads.bin", grads.data(), grads.size());
  WriteBinary(dir / "lrs.bin", lrs.data(), lrs.size());
  const std::string command = std::string("/usr/bin/python3 ") + TITAN_SOURCE_DIR +
                              "/tests/reference/optimizer_reference.py " + dir.string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const std::vector<float> expected = ReadFloats(dir / "params_after.bin");
  ASSERT_EQ(expected.size(), params.size());

  std::vector<float> ours = params;
  std::vector<float> state((*optimizer)->StateNames().size() * kN, 0.0f);
  const std::vector<ParamSegment> segments = {{0, kDecayed, true},
                                              {kDecayed, kN - kDecayed, false}};
  for (int t = 0; t < kSteps; ++t) {
    OptimizerStep step{FlatF32(ours.data(), kN),
                       FlatF32(grads.data() + t * kN, kN),
                       FlatF32(state.data(), static_cast<int64_t>(state.size())),
                       segments,
                       lrs[t],
                       t + 1,
                       &CpuCompute::Get()};
    ASSERT_TRUE((*optimizer)->Step(step).ok());
  }
  // The parameters after 10 steps, relative to their norm: the 1e-6.
  const double param_error = RelativeError(ours.data(), expected.data(), kN);
  EXPECT_LE(param_error, 1e-6) << c.name;
  // The update alone (after - before) is bounded by f32 rounding of the parameters: one ulp of
  // a unit weight is ~1e-7, ~1e-6 of a 10-step update, and torch's CPU kernels fuse
  // multiply-adds that titan's do not, so its bound is looser.
  std::vector<float> our_update(kN), torch_update(kN);
  for (int i = 0; i < kN; ++i) {
    our_update[i] = ours[i] - params[i];
    torch_update[i] = expected[i] - params[i];
  }
  const double update_error = RelativeError(our_update.data(), torch_update.data(), kN);
  EXPECT_LE(update_error, 1e-5) << c.name;
  RecordProperty("relative_param_error", absl::StrCat(param_error));
  RecordProperty("relative_update_error", absl::StrCat(update_error));
}

INSTANTIATE_TEST_SUITE_P(
    Plugins, OptimizerReferenceTest,
    ::testing::Values(OptimizerCase{"adamw",
                                    "name = \"adamw\"\nbeta1 = 0.8\nbeta2 = 0.9\neps = 1e-6\n"
                                    "weight_decay = 0.1\n",
                                    "beta1 0.8\nbeta2 0.9\neps 1e-6\nweight_decay 0.1\n"},
                      OptimizerCase{"adam",
                                    "name = \"adam\"\nbeta1 = 0.9\nbeta2 = 0.95\neps = 1e-8\n"
                                    "weight_decay = 0.05\n",
                                    "beta1 0.9\nbeta2 0.95\neps 1e-8\nweight_decay 0.05\n"},
                      OptimizerCase{"sgd",
                                    "name = \"sgd\"\nlr = 0.01\nmomentum = 0.9\nnesterov = true\n"
                                    "weight_decay = 0.01\n",
                                    "momentum 0.9\ndampening 0\nnesterov 1\nweight_decay 0.01\n"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace titan::reference
