// Each optimizer plugin, loaded as a plugin, against a scalar double-precision transcription
// of torch.optim's update rules.
#include "titan/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/cpu/cpu_compute.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/recipe.h"

namespace titan {
namespace {

struct LoadedOptimizer {
  std::unique_ptr<PluginRegistry> registry;
  std::unique_ptr<OptimizerPlugin> optimizer;
};

// Creates and configures the plugin the way the recipe does.
LoadedOptimizer Make(const std::string& section_text) {
  LoadedOptimizer setup;
  setup.registry = std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value();
  auto raw = ParseRecipeText(section_text, "test.toml");
  EXPECT_TRUE(raw.ok()) << raw.status();
  auto recipe = ValidateRecipe(*raw, *setup.registry);
  EXPECT_TRUE(recipe.ok()) << recipe.status();
  auto name = recipe->section("optimizer").GetString("name");
  setup.optimizer = std::move(setup.registry->Create<OptimizerPlugin>(*name)).value();
  EXPECT_TRUE(setup.optimizer->Configure(recipe->section("optimizer")).ok());
  return setup;
}

struct Buffers {
  std::vector<float> params, grads, state;
  std::vector<ParamSegment> segments;
};

Buffers RandomBuffers(int n, int state_slots, std::mt19937& random) {
  std::normal_distribution<float> normal;
  Buffers b;
  for (int i = 0; i < n; ++i) b.params.push_back(normal(random));
  b.grads.resize(n);
  b.state.assign(static_cast<size_t>(state_slots) * n, 0.0f);
  b.segments = {{0, n / 2, true}, {n / 2, n - n / 2, false}};
  return b;
}

OptimizerStep StepOf(Buffers& b, double lr, int64_t step) {
  return OptimizerStep{FlatF32(b.params.data(), static_cast<int64_t>(b.params.size())),
                       FlatF32(b.grads.data(), static_cast<int64_t>(b.grads.size())),
                       FlatF32(b.state.data(), static_cast<int64_t>(b.state.size())),
                       b.segments,
                       lr,
                       step,
                       &CpuCompute::Get()};
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 * (1.0 + std::fabs(want[i]))) << "at " << i;
  }
}

void CheckAdam(bool decoupled) {
  const double lr = 1e-2, beta1 = 0.8, beta2 = 0.9, eps = 1e-6, wd = 0.05;
  LoadedOptimizer setup =
      Make(std::string("[optimizer]\nname = \"") + (decoupled ? "adamw" : "adam") +
           "\"\nlr = 0.01\nbeta1 = 0.8\nbeta2 = 0.9\neps = 1e-6\nweight_decay = 0.05\n");
  ASSERT_EQ(setup.optimizer->StateNames(), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  std::mt19937 random(7);
  const int n = 37;
  Buffers b = RandomBuffers(n, 2, random);
  std::vector<double> p(b.params.begin(), b.params.end()), m(n, 0.0), v(n, 0.0);
  std::normal_distribution<float> normal;
  for (int t = 1; t <= 10; ++t) {
    double step_lr = lr * t / 10.0;  // a schedule: the plugin must use the lr it is given
    for (int i = 0; i < n; ++i) b.grads[i] = normal(random);
    ASSERT_TRUE(setup.optimizer->Step(StepOf(b, step_lr, t)).ok());
    for (int i = 0; i < n; ++i) {
      double decay = i < n / 2 ? wd : 0.0, g = b.grads[i];
      if (decoupled)
        p[i] *= 1.0 - step_lr * decay;
      else
        g += decay * p[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      double denom = std::sqrt(v[i]) / std::sqrt(1 - std::pow(beta2, t)) + eps;
      p[i] -= step_lr / (1 - std::pow(beta1, t)) * m[i] / denom;
    }
  }
  ExpectClose(b.params, p);
}

TEST(Optimizer, AdamWMatchesTorchFormula) { CheckAdam(true); }
TEST(Optimizer, AdamMatchesTorchFormula) { CheckAdam(false); }

void CheckSgd(double momentum, double dampening, bool nesterov) {
  const double lr = 0.05, wd = 0.01;
  LoadedOptimizer setup =
      Make("[optimizer]\nname = \"sgd\"\nlr = 0.05\nweight_decay = 0.01\nmomentum = " +
           std::to_string(momentum) + "\ndampening = " + std::to_string(dampening) +
           "\nnesterov = " + (nesterov ? "true" : "false") + "\n");
  const int slots = momentum == 0.0 ? 0 : 1;
  ASSERT_EQ(static_cast<int>(setup.optimizer->StateNames().size()), slots);
  std::mt19937 random(11);
  const int n = 29;
  Buffers b = RandomBuffers(n, slots, random);
  std::vector<double> p(b.params.begin(), b.params.end()), buf(n, 0.0);
  std::normal_distribution<float> normal;
  for (int t = 1; t <= 10; ++t) {
    for (int i = 0; i < n; ++i) b.grads[i] = normal(random);
    ASSERT_TRUE(setup.optimizer->Step(StepOf(b, lr, t)).ok());
    for (int i = 0; i < n; ++i) {
      double g = b.grads[i] + (i < n / 2 ? wd : 0.0) * p[i];
      if (momentum != 0.0) {
        buf[i] = t == 1 ? g : momentum * buf[i] + (1 - dampening) * g;
        g = nesterov ? g + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * g;
    }
  }
  ExpectClose(b.params, p);
}

TEST(Optimizer, SgdMatchesTorchFormula) { CheckSgd(0.0, 0.0, false); }
TEST(Optimizer, SgdMomentumMatchesTorchFormula) { CheckSgd(0.9, 0.1, false); }
TEST(Optimizer, SgdNesterovMatchesTorchFormula) { CheckSgd(0.9, 0.0, true); }

TEST(Optimizer, RejectsMismatchedBuffers) {
  LoadedOptimizer setup = Make("[optimizer]\nname = \"adamw\"\n");
  std::vector<float> params(4), grads(3), state(8);
  std::vector<ParamSegment> segments = {{0, 4, true}};
  OptimizerStep step{FlatF32(params.data(), 4),
                     FlatF32(grads.data(), 3),
                     FlatF32(state.data(), 8),
                     segments,
                     0.1,
                     1,
                     &CpuCompute::Get()};
  auto status = setup.optimizer->Step(step);
  EXPECT_EQ(status.message(),
            "optimizer step: 4 parameters need 4 gradients and 8 state values, got 3 and 8");
  grads.resize(4);
  step.grads = FlatF32(grads.data(), 4);
  segments[0].count = 5;
  EXPECT_EQ(setup.optimizer->Step(step).message(),
            "optimizer segment [0, 5) lies outside the 4 parameters");
  segments[0].count = 4;
  step.step = 0;
  EXPECT_EQ(setup.optimizer->Step(step).message(), "optimizer step numbers start at 1");
}

}  // namespace
}  // namespace titan
