#include "titan/float8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/runtime/plugin_registry.h"
#include "titan/float8_cast.h"

namespace titan::float8 {
namespace {

// Every finite code decodes to a value that encodes back to the same code.
void CheckRoundTrip(const Float8Format& format, int finite_codes_expected) {
  int finite = 0;
  for (int code = 0; code < 256; ++code) {
    float value = DecodeFloat8(static_cast<uint8_t>(code), format);
    if (!std::isfinite(value)) continue;
    ++finite;
    if (value == 0.0f) {
      EXPECT_EQ(EncodeFloat8(value, format) & 0x7f, 0) << code;
      continue;
    }
    EXPECT_EQ(EncodeFloat8(value, format), code) << "code " << code << " value " << value;
  }
  EXPECT_EQ(finite, finite_codes_expected);
}

TEST(Float8Cast, E4M3RoundTripsEveryFiniteCode) { CheckRoundTrip(kE4M3, 254); }
TEST(Float8Cast, E5M2RoundTripsEveryFiniteCode) { CheckRoundTrip(kE5M2, 248); }

TEST(Float8Cast, KnownValues) {
  EXPECT_EQ(DecodeFloat8(0x7e, kE4M3), 448.0f);                // largest e4m3
  EXPECT_EQ(DecodeFloat8(0x01, kE4M3), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(DecodeFloat8(0x38, kE4M3), 1.0f);
  EXPECT_EQ(DecodeFloat8(0x7b, kE5M2), 57344.0f);
  EXPECT_EQ(DecodeFloat8(0x3c, kE5M2), 1.0f);
  EXPECT_TRUE(std::isinf(DecodeFloat8(0x7c, kE5M2)));
  EXPECT_TRUE(std::isnan(DecodeFloat8(0x7f, kE4M3)));
  EXPECT_TRUE(std::isnan(DecodeFloat8(EncodeFloat8(NAN, kE4M3), kE4M3)));
}

TEST(Float8Cast, RoundsToNearestEvenAndSaturates) {
  // Between 1.0 (mantissa 000) and 1.125 (001) the tie goes to the even 1.0; between 1.125 and
  // 1.25 (010) to the even 1.25.
  EXPECT_EQ(DecodeFloat8(EncodeFloat8(1.0625f, kE4M3), kE4M3), 1.0f);
  EXPECT_EQ(DecodeFloat8(EncodeFloat8(1.1875f, kE4M3), kE4M3), 1.25f);
  EXPECT_EQ(DecodeFloat8(EncodeFloat8(1.07f, kE4M3), kE4M3), 1.125f);
  EXPECT_EQ(DecodeFloat8(EncodeFloat8(470.0f, kE4M3), kE4M3), 448.0f);
  EXPECT_EQ(DecodeFloat8(EncodeFloat8(-1e9f, kE4M3), kE4M3), -448.0f);
  EXPECT_EQ(DecodeFloat8(EncodeFloat8(INFINITY, kE5M2), kE5M2), 57344.0f);
  // Subnormal ties: half the smallest subnormal rounds to zero (even), 1.5 of it to 2.
  float tiny = std::ldexp(1.0f, -9);
  EXPECT_EQ(DecodeFloat8(EncodeFloat8(tiny / 2, kE4M3), kE4M3), 0.0f);
  EXPECT_EQ(DecodeFloat8(EncodeFloat8(tiny * 1.5f, kE4M3), kE4M3), tiny * 2);
}

TEST(Float8Cast, RelativeErrorOfNormalsIsHalfAnUlp) {
  std::mt19937 random(3);
  std::uniform_real_distribution<float> uniform(-400.0f, 400.0f);
  for (int i = 0; i < 10000; ++i) {
    float x = uniform(random);
    if (std::fabs(x) < 0.02f) continue;  // normals only
    float y = DecodeFloat8(EncodeFloat8(x, kE4M3), kE4M3);
    EXPECT_LE(std::fabs(y - x), std::fabs(x) * std::ldexp(1.0f, -4) * 1.0001f) << x;
  }
}

// The plugin configured directly: recipes refuse Float8 keys until the trainer uses them
// (issue #18).
std::unique_ptr<Float8Plugin> MakeTensorwise(std::vector<std::string> filter) {
  static auto registry = std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value();
  auto plugin = std::move(registry->Create<Float8Plugin>("tensorwise")).value();
  const ConfigView config("float8", {{"filter_fqns", {ConfigValue(std::move(filter)), "t.toml"}}});
  EXPECT_TRUE(plugin->Configure(config).ok());
  return plugin;
}

TEST(Tensorwise, ScalesTheLargestMagnitudeToTheLargestFinite) {
  auto plugin = MakeTensorwise({"output"});
  std::vector<float> x = {0.5f, -2.0f, 0.01f, 1.0f, 0.0f};
  std::vector<uint8_t> q(x.size());
  float inverse_scale = 0;
  TensorView out{q.data(), DType::kF8E4M3, {}, {5}, {}};
  ASSERT_TRUE(
      plugin->Quantize(FlatF32(x.data(), 5), Float8Role::kWeight, out, FlatF32(&inverse_scale, 1))
          .ok());
  EXPECT_FLOAT_EQ(inverse_scale, 2.0f / 448.0f);
  EXPECT_EQ(DecodeFloat8(q[1], kE4M3), -448.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    float back = DecodeFloat8(q[i], kE4M3) * inverse_scale;
    EXPECT_NEAR(back, x[i], std::fabs(x[i]) / 16 + 1e-6) << i;
  }
  EXPECT_FALSE(plugin->Converts("output"));
  EXPECT_TRUE(plugin->Converts("layers.0.attention.wq"));
}

TEST(Tensorwise, GradientsUseE5M2AndMismatchesAreErrors) {
  auto plugin = MakeTensorwise({});
  std::vector<float> x = {1e-3f, 3.0f};
  std::vector<uint8_t> q(2);
  float inverse_scale = 0;
  TensorView e4m3{q.data(), DType::kF8E4M3, {}, {2}, {}};
  auto wrong = plugin->Quantize(FlatF32(x.data(), 2), Float8Role::kGradOutput, e4m3,
                                FlatF32(&inverse_scale, 1));
  EXPECT_EQ(wrong.message(), "tensorwise float8: output must be 2 x f8e5m2, got 2 x f8e4m3");
  TensorView e5m2{q.data(), DType::kF8E5M2, {}, {2}, {}};
  ASSERT_TRUE(plugin
                  ->Quantize(FlatF32(x.data(), 2), Float8Role::kGradOutput, e5m2,
                             FlatF32(&inverse_scale, 1))
                  .ok());
  EXPECT_FLOAT_EQ(DecodeFloat8(q[1], kE5M2) * inverse_scale, 3.0f);
  EXPECT_TRUE(plugin->Converts("output"));
}

}  // namespace
}  // namespace titan::float8
