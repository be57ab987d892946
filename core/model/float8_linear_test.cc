#include "core/model/float8_linear.h"

#include <gmock/gmock.h>
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

// A mixture of experts' routed expert weights [experts, out, in] convert under a rowwise recipe
// (their per-expert [out, in] divisible by 16, the experts' count free), never under tensorwise,
// and float8.filter_fqns keeps them as it keeps linear layers; the log says which and why.
TEST(Float8Linears, GroupedExpertsConvertOnlyUnderARowwiseRecipe) {
  const std::vector<Float8LinearChoice> experts = {
      {0, "layers.0.attention.wq", {32, 32}},
      {1, "layers.0.moe.experts.w1", {6, 48, 32}, Float8LinearChoice::kFloat8, true},
      {2, "layers.0.moe.experts.w2", {6, 32, 48}, Float8LinearChoice::kFloat8, true},
      {3, "layers.1.moe.experts.w1", {4, 24, 32}, Float8LinearChoice::kFloat8, true}};
  const auto rowwise = ChooseFloat8Linears(experts, RowwiseTestPlugin());
  EXPECT_EQ(rowwise[1].outcome, Float8LinearChoice::kFloat8);
  EXPECT_EQ(rowwise[2].outcome, Float8LinearChoice::kFloat8);
  EXPECT_EQ(rowwise[3].outcome, Float8LinearChoice::kShapeNotDivisibleBy16);
  auto lines = DescribeFloat8Linears(rowwise, "rowwise", RowwiseTestPlugin().Recipe());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1], "[float8] 1 of 1 linear layers in Float8: layers.0.attention.wq");
  EXPECT_EQ(lines[2],
            "[float8] 2 of 3 routed expert weights in Float8 (grouped GEMMs, each expert's rows "
            "and weight scaled on their own): layers.0.moe.experts.w1, layers.0.moe.experts.w2");
  EXPECT_EQ(lines[3],
            "[float8] layers.1.moe.experts.w1 stays in high precision: its weight [24, 32] (of 4 "
            "experts) is not divisible by 16");
  Float8Linears linears(RowwiseTestPlugin().Recipe(), CpuCompute::Get(), nullptr, rowwise);
  EXPECT_TRUE(linears.Converts(1));
  EXPECT_FALSE(linears.Converts(3));

  const auto tensorwise = ChooseFloat8Linears(experts, TestPlugin());
  EXPECT_EQ(tensorwise[0].outcome, Float8LinearChoice::kFloat8);
  for (int i = 1; i < 4; ++i)
    EXPECT_EQ(tensorwise[i].outcome, Float8LinearChoice::kGroupedNeedsRowwise);
  lines = DescribeFloat8Linears(tensorwise, "tensorwise", TestPlugin().Recipe());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2],
            "[float8] the routed experts stay in high precision (3 expert weights): grouped "
            "experts run in Float8 only with rowwise scales, as TorchTitan's, and recipe "
            "tensorwise scales the forward's operands per tensor; float8.recipe_name = "
            "\"rowwise\" converts them");

  const auto filtered =
      ChooseFloat8Linears(experts, RowwiseTestPlugin(std::vector<std::string>{"moe.experts"}));
  EXPECT_EQ(filtered[0].outcome, Float8LinearChoice::kFloat8);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(filtered[i].outcome, Float8LinearChoice::kFiltered);
  lines = DescribeFloat8Linears(filtered, "rowwise", RowwiseTestPlugin().Recipe());
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[2],
            "[float8] 0 of 3 routed expert weights in Float8 (grouped GEMMs, each "
            "expert's rows and weight scaled on their own): none");
  EXPECT_EQ(lines[3],
            "[float8] layers.0.moe.experts.w1 stays in high precision: matched by "
            "float8.filter_fqns");
}

TensorView HostF32(std::vector<float>& v, std::vector<int64_t> shape) {
  return TensorView{v.data(), DType::kF32, Device{}, std::move(shape), {}};
}

// An expert's rows that come in pieces (one per source rank under expert parallelism) are
// quantized as one group for its weight gradient, as torchao scales a group: the result equals,
// bit for bit, the gradient of the rows joined, and differs from the pieces quantized apart when
// their magnitudes differ (one piece's rows 2^10 larger).
TEST(Float8Linears, AGroupedWeightGradientScalesTheExpertsPiecesTogether) {
  const int64_t rows[2] = {5, 11}, out = 16, in = 32, total = rows[0] + rows[1];
  std::vector<float> dout(total * out), x(total * in);
  for (int64_t r = 0; r < total; ++r) {
    const float magnitude = r < rows[0] ? 1.0f : 1024.0f;
    for (int64_t c = 0; c < out; ++c)
      dout[r * out + c] = magnitude * std::sin(0.7f * (r * out + c));
    for (int64_t c = 0; c < in; ++c) x[r * in + c] = magnitude * std::cos(0.3f * (r * in + c));
  }
  auto piece = [&](std::vector<float>& v, int64_t width, int index) {
    const int64_t first = index == 0 ? 0 : rows[0];
    return TensorView{v.data() + first * width, DType::kF32, Device{}, {rows[index], width}, {}};
  };
  Float8Linears linears(RowwiseTestPlugin().Recipe(), CpuCompute::Get(), nullptr, {});
  std::vector<float> grouped(out * in, 0.0f), joined(out * in, 0.0f), apart(out * in, 0.0f);
  const TensorView dout_pieces[] = {piece(dout, out, 0), piece(dout, out, 1)};
  const TensorView x_pieces[] = {piece(x, in, 0), piece(x, in, 1)};
  ASSERT_TRUE(linears.GroupedWeightGrad(dout_pieces, x_pieces, HostF32(grouped, {out, in})).ok());
  ASSERT_TRUE(linears
                  .WeightGrad(HostF32(dout, {total, out}), HostF32(x, {total, in}),
                              HostF32(joined, {out, in}))
                  .ok());
  EXPECT_EQ(grouped, joined);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(linears.WeightGrad(dout_pieces[i], x_pieces[i], HostF32(apart, {out, in})).ok());
  }
  EXPECT_NE(apart, joined);
  // One piece is the plain weight gradient; mismatched pieces are refused.
  std::vector<float> one(out * in, 0.0f), alone(out * in, 0.0f);
  ASSERT_TRUE(
      linears.GroupedWeightGrad({dout_pieces, 1}, {x_pieces, 1}, HostF32(one, {out, in})).ok());
  ASSERT_TRUE(linears.WeightGrad(dout_pieces[0], x_pieces[0], HostF32(alone, {out, in})).ok());
  EXPECT_EQ(one, alone);
  EXPECT_THAT(
      linears.GroupedWeightGrad(dout_pieces, {x_pieces, 1}, HostF32(one, {out, in})).message(),
      ::testing::HasSubstr("as many pieces of dout as of in"));
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
  EXPECT_TRUE(model->Initialize(7).ok());
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

// A Qwen3 mixture of experts with every linear layer kept in high precision by the filter: a
// rowwise recipe moves only the routed experts (they ran in Float8), a tensorwise one nothing
// (they stayed in high precision, bit for bit), and filtering moe.experts too leaves the f32 run.
TEST(Float8Linears, TheRoutedExpertsRunInFloat8OnlyUnderARowwiseRecipe) {
  LlamaConfig config = *Qwen3Family().Flavor("debugmodel_moe");
  config.dim = 32, config.n_layers = 2, config.n_heads = 4, config.n_kv_heads = 2;
  config.explicit_head_dim = 8, config.explicit_hidden_dim = 48, config.vocab_size = 64;
  config.moe.experts = 4, config.moe.top_k = 2, config.moe.hidden_dim = 16;
  auto step = [&](const Float8Plugin* plugin) {
    auto ac = ParseActivationCheckpoint("none", "");
    auto model =
        std::move(DecoderModel::Create(config, *ac, ModelCompute{}, PipelinePlan{}, Qwen3Family()))
            .value();
    if (plugin != nullptr) {
      EXPECT_TRUE(model->ConvertToFloat8(*plugin).ok());
    }
    EXPECT_TRUE(model->Initialize(3).ok());
    std::vector<int32_t> tokens, targets;
    for (int i = 0; i < 2 * 16; ++i) tokens.push_back((i * 7 + 3) % 64), targets.push_back(i % 64);
    const float loss = model->Forward(tokens.data(), targets.data(), 2, 16).value();
    EXPECT_TRUE(model->Backward().ok());
    const Arena& grads = model->grads();
    return std::pair(loss,
                     std::vector<float>(grads.flat_data(), grads.flat_data() + grads.flat_size()));
  };
  const std::vector<std::string> dense = {"attention", "output"};
  std::vector<std::string> everything = dense;
  everything.push_back("moe.experts");
  const auto f32 = step(nullptr);
  const RowwiseTestPlugin rowwise(dense), rowwise_none(everything);
  const TensorwiseTestPlugin tensorwise(dense);
  const auto experts_in_float8 = step(&rowwise);
  EXPECT_NE(experts_in_float8.first, f32.first);
  EXPECT_NEAR(experts_in_float8.first, f32.first, 0.05 * f32.first);
  EXPECT_NE(experts_in_float8.second, f32.second);
  EXPECT_EQ(step(&tensorwise), f32);
  EXPECT_EQ(step(&rowwise_none), f32);
}

}  // namespace
}  // namespace titan
