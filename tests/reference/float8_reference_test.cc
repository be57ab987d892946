// Each float8 recipe's linear layer (core/model/float8_linear.h on the CPU compute) against a
// PyTorch emulation of torchao's Float8 linear (float8_reference.py) on the same tensors: the
// float8 codes and inverse scales of every GEMM operand equal, and y = x W^T, dx = dy W and
// dW = dy^T x within 1e-5 relative (f32 sums here, f64 there, of the same exact products).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/cpu/cpu_compute.h"
#include "core/runtime/plugin_registry.h"
#include "tests/reference/reference_files.h"
#include "titan/float8.h"

namespace titan::reference {
namespace {

constexpr int64_t kN = 48, kIn = 64, kOut = 32;
constexpr double kTolerance = 1e-5;

TensorView View(std::vector<float>& v, std::vector<int64_t> shape) {
  return TensorView{v.data(), DType::kF32, {}, std::move(shape), {}};
}

// Rows of different magnitudes (so per-row scales differ from the tensor's), one row all zeros
// (the amax floor) and one huge value (saturation of its neighbours' scale).
std::vector<float> RandomRows(int64_t rows, int64_t columns, std::mt19937& random) {
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(rows * columns));
  for (int64_t r = 0; r < rows; ++r) {
    const float magnitude = std::ldexp(1.0f, static_cast<int>(r % 9) - 4);
    for (int64_t c = 0; c < columns; ++c) v[r * columns + c] = normal(random) * magnitude;
  }
  std::fill(v.begin() + 3 * columns, v.begin() + 4 * columns, 0.0f);
  v[5 * columns + 7] = 3e4f;
  return v;
}

void ExpectOperand(const Float8Linears& linears, int index, const fs::path& dir,
                   const std::string& name) {
  const Float8Linears::Operand& op = linears.last_operand(index);
  const auto codes = ReadBinary<uint8_t>(dir / (name + "_codes.bin"));
  const auto scales = ReadFloats(dir / (name + "_scales.bin"));
  ASSERT_EQ(static_cast<int64_t>(codes.size()), op.codes.numel()) << name;
  ASSERT_EQ(static_cast<int64_t>(scales.size()), op.inverse_scales.numel()) << name;
  const uint8_t* ours = op.codes.data_as<const uint8_t>();
  int mismatches = 0;
  for (size_t i = 0; i < codes.size(); ++i) mismatches += ours[i] != codes[i];
  EXPECT_EQ(mismatches, 0) << name << ": codes differ from torchao's";
  const float* our_scales = op.inverse_scales.data_as<const float>();
  for (size_t i = 0; i < scales.size(); ++i) {
    EXPECT_EQ(our_scales[i], scales[i]) << name << " scale " << i;
  }
}

class Float8ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Float8ReferenceTest, LinearMatchesTorchaoEmulation) {
  if (!HaveTorch()) FAIL() << kNoTorch;
  const std::string recipe_name = GetParam();
  auto registry = PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR});
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto plugin = (*registry)->Create<Float8Plugin>(recipe_name);
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  const ConfigView config("float8",
                          {{"filter_fqns", {ConfigValue(std::vector<std::string>{}), "t.toml"}}});
  ASSERT_TRUE((*plugin)->Configure(config).ok());
  const Float8Recipe recipe = (*plugin)->Recipe();

  std::mt19937 random(5);
  std::vector<float> x = RandomRows(kN, kIn, random), w = RandomRows(kOut, kIn, random);
  std::vector<float> dy = RandomRows(kN, kOut, random);
  const fs::path dir = fs::path(::testing::TempDir()) / ("float8_reference_" + recipe_name);
  fs::create_directories(dir);
  std::ofstream(dir / "case.txt") << "recipe " << recipe_name << "\nn " << kN << "\nin " << kIn
                                  << "\nout " << kOut << "\n";
  WriteBinary(dir / "x.bin", x.data(), x.size());
  WriteBinary(dir / "w.bin", w.data(), w.size());
  WriteBinary(dir / "dy.bin", dy.data(), dy.size());
  const std::string command = std::string("/usr/bin/python3 ") + TITAN_SOURCE_DIR +
                              "/tests/reference/float8_reference.py " + dir.string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  Float8Linears linears(recipe, CpuCompute::Get(), nullptr,
                        {{0, "layer", {kOut, kIn}, Float8LinearChoice::kFloat8}});
  ASSERT_TRUE(linears.Converts(0));
  std::vector<float> y(kN * kOut), dx(kN * kIn, 0.0f), dw(kOut * kIn, 0.0f);
  ASSERT_TRUE(
      linears
          .Forward(View(x, {kN, kIn}), {View(w, {kOut, kIn}), {}, {}}, View(y, {kN, kOut}), false)
          .ok());
  ExpectOperand(linears, 0, dir, "output_a");
  ExpectOperand(linears, 1, dir, "output_b");
  ASSERT_TRUE(
      linears.InputGrad(View(dy, {kN, kOut}), {View(w, {kOut, kIn}), {}, {}}, View(dx, {kN, kIn}))
          .ok());
  ExpectOperand(linears, 0, dir, "grad_input_a");
  ExpectOperand(linears, 1, dir, "grad_input_b");
  ASSERT_TRUE(
      linears.WeightGrad(View(dy, {kN, kOut}), View(x, {kN, kIn}), View(dw, {kOut, kIn})).ok());
  if (!recipe.grad_weight.high_precision) {
    ExpectOperand(linears, 0, dir, "grad_weight_a");
    ExpectOperand(linears, 1, dir, "grad_weight_b");
  }
  for (const auto& [name, ours] :
       {std::pair<std::string, const std::vector<float>*>{"y", &y}, {"dx", &dx}, {"dw", &dw}}) {
    const std::vector<float> expected = ReadFloats(dir / (name + ".bin"));
    ASSERT_EQ(expected.size(), ours->size()) << name;
    EXPECT_LE(RelativeError(ours->data(), expected.data(), expected.size()), kTolerance) << name;
  }

  // Float8 did run: most of y is off the f32 product by far more than f32 rounding.
  std::vector<float> exact(kN * kOut, 0.0f);
  ASSERT_TRUE(CpuCompute::Get()
                  .Gemm(View(x, {kN, kIn}), false, View(w, {kOut, kIn}), true, 1.0f, 0.0f,
                        View(exact, {kN, kOut}))
                  .ok());
  int64_t off = 0;
  for (size_t i = 0; i < y.size(); ++i)
    off += std::fabs(y[i] - exact[i]) > 1e-3 * std::fabs(exact[i]);
  EXPECT_GT(off, static_cast<int64_t>(y.size()) / 2);
  // Accumulating adds the same product.
  std::vector<float> twice = y;
  ASSERT_TRUE(linears
                  .Forward(View(x, {kN, kIn}), {View(w, {kOut, kIn}), {}, {}},
                           View(twice, {kN, kOut}), true)
                  .ok());
  for (size_t i = 0; i < y.size(); ++i) ASSERT_FLOAT_EQ(twice[i], 2 * y[i]) << i;

  // The weight as fsdp's float8 all-gather hands it over: quantized once, tensorwise e4m3. The
  // tensorwise recipe's GEMMs take it as they are, with the same bytes and results to the bit;
  // the others scale weights otherwise and refuse it.
  std::vector<uint8_t> codes(kOut * kIn);
  float inverse_scale = 0;
  const TensorView gathered_codes{codes.data(), DType::kF8E4M3, Device{}, {kOut, kIn}, {}};
  ASSERT_TRUE(CpuCompute::Get()
                  .Float8Quantize(View(w, {kOut, kIn}),
                                  {Float8Granularity::kTensor, false, false, {}}, gathered_codes,
                                  FlatF32(&inverse_scale, 1))
                  .ok());
  const Float8Operand gathered{{}, gathered_codes, FlatF32(&inverse_scale, 1)};
  std::vector<float> y_gathered(kN * kOut), dx_gathered(kN * kIn, 0.0f);
  const absl::Status forward =
      linears.Forward(View(x, {kN, kIn}), gathered, View(y_gathered, {kN, kOut}), false);
  if (recipe_name != "tensorwise") {
    EXPECT_THAT(forward.message(), ::testing::HasSubstr("tensorwise e4m3"));
    return;
  }
  ASSERT_TRUE(forward.ok()) << forward;
  ExpectOperand(linears, 1, dir, "output_b");
  ASSERT_TRUE(linears.InputGrad(View(dy, {kN, kOut}), gathered, View(dx_gathered, {kN, kIn})).ok());
  ExpectOperand(linears, 1, dir, "grad_input_b");
  EXPECT_EQ(y_gathered, y);
  EXPECT_EQ(dx_gathered, dx);
}

INSTANTIATE_TEST_SUITE_P(Recipes, Float8ReferenceTest,
                         ::testing::Values("tensorwise", "rowwise", "rowwise_with_gw_hp"));

}  // namespace
}  // namespace titan::reference
