#include "core/model/float8_linear.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/cpu/cpu_compute.h"
#include "core/model/decoder_model.h"
#include "core/model/float8_test_plugin.h"

namespace titan {
namespace {

using TestPlugin = TensorwiseTestPlugin;

TEST(Float8Linears, FilteredAndMisshapenLayersStayInHighPrecisionAndTheLogSaysWhy) {
  const auto choices = ChooseFloat8Linears({{0, "layers.0.attention.wq", {32, 32}},
                                            {1, "layers.0.feed_forward.w2", {32, 96}},
                                            {2, "output", {50, 32}},
                                            {3, "layers.0.attention.wk", {16, 40}}},
                                           TestPlugin(std::vector<std::string>{"w2"}));
  EXPECT_EQ(choices[0].outcome, Float8LinearChoice::kFloat8);
  EXPECT_EQ(choices[1].outcome, Float8LinearChoice::kFiltered);
  EXPECT_EQ(choices[2].outcome, Float8LinearChoice::kShapeNotDivisibleBy16);
  EXPECT_EQ(choices[3].outcome, Float8LinearChoice::kShapeNotDivisibleBy16);
  const auto lines = DescribeFloat8Linears(choices, "tensorwise", TestPlugin().Recipe());
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0],
            "[float8] recipe tensorwise: output e4m3/tensor x e4m3/tensor, grad_input e5m2/tensor "
            "x e4m3/tensor, grad_weight e5m2/tensor x e4m3/tensor");
  EXPECT_EQ(lines[1], "[float8] 1 of 4 linear layers in Float8: layers.0.attention.wq");
  EXPECT_EQ(lines[2],
            "[float8] layers.0.feed_forward.w2 stays in high precision: matched by "
            "float8.filter_fqns");
  EXPECT_EQ(lines[3],
            "[float8] output stays in high precision: its weight [50, 32] is not divisible by 16");
  Float8Linears linears(TestPlugin().Recipe(), CpuCompute::Get(), nullptr, choices);
  EXPECT_TRUE(linears.Converts(0));
  EXPECT_FALSE(linears.Converts(1));
  EXPECT_FALSE(linears.Converts(2));
  EXPECT_FALSE(linears.Converts(7));
}

LlamaConfig TinyConfig() {
  LlamaConfig config;
  config.dim = 32, config.n_layers = 2, config.n_heads = 4, config.n_kv_heads = 2;
  config.vocab_size = 50, config.multiple_of = 16;  // the output [50, 32]: not divisible by 16
  return config;
}

// One forward and backward of a fresh model: the loss and every gradient.
std::pair<float, std::vector<float>> Step(const Float8Plugin* plugin,
                                          std::vector<Float8LinearChoice>* choices = nullptr) {
  auto model = std::move(DecoderModel::Create(TinyConfig())).value();
  if (plugin != nullptr) {
    auto made = model->ConvertToFloat8(*plugin).value();
    if (choices != nullptr) *choices = made;
  }
  model->Initialize(7);
  std::vector<int32_t> tokens, targets;
  for (int i = 0; i < 2 * 16; ++i) {
    tokens.push_back((i * 7 + 3) % 50);
    targets.push_back((i * 11 + 5) % 50);
  }
  const float loss = model->Forward(tokens.data(), targets.data(), 2, 16).value();
  EXPECT_TRUE(model->Backward().ok());
  const Arena& grads = model->grads();
  return {loss, std::vector<float>(grads.flat_data(), grads.flat_data() + grads.flat_size())};
}

TEST(Float8Linears, TheConverterChangesOnlyTheLayersItConverts) {
  const auto [f32_loss, f32_grads] = Step(nullptr);
  std::vector<Float8LinearChoice> choices;
  const TestPlugin all, none(std::vector<std::string>{"layers", "output"});
  const auto [loss, grads] = Step(&all, &choices);
  ASSERT_EQ(choices.size(), 2u * 7 + 1);
  for (const Float8LinearChoice& c : choices) {
    EXPECT_EQ(c.outcome, c.fqn == "output" ? Float8LinearChoice::kShapeNotDivisibleBy16
                                           : Float8LinearChoice::kFloat8)
        << c.fqn;
  }
  // Float8 runs: the loss and the gradients move, by about the casts' relative error (2^-4).
  EXPECT_NE(loss, f32_loss);
  EXPECT_NEAR(loss, f32_loss, 0.05 * f32_loss);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    diff += std::pow(grads[i] - f32_grads[i], 2);
    norm += std::pow(f32_grads[i], 2);
  }
  EXPECT_GT(std::sqrt(diff / norm), 1e-3);
  EXPECT_LT(std::sqrt(diff / norm), 0.5);
  // Every layer filtered: the f32 run, bit for bit.
  const auto [same_loss, same_grads] = Step(&none);
  EXPECT_EQ(same_loss, f32_loss);
  EXPECT_EQ(same_grads, f32_grads);
}

}  // namespace
}  // namespace titan
