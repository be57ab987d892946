// The Float8 casts (titan/float8_cast.h) against the OCP 8-bit floating point specification
// (OFP8, v1.0), every code; and the recipes the float8 plugins describe.
#include "titan/float8.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "core/cpu/float8_encode.h"
#include "core/runtime/plugin_registry.h"
#include "titan/float8_cast.h"

namespace titan::float8 {
namespace {

// The specification's table, written out: E4M3 (bias 7, S.1111.111 is NaN, no infinities) and
// E5M2 (bias 15, exponent 11111 holds the infinities and NaNs, as IEEE 754).
float SpecE4M3(int code) {
  const int s = code >> 7, e = (code >> 3) & 0xf, m = code & 0x7;
  const double sign = s ? -1.0 : 1.0;
  if (e == 0xf && m == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (e == 0) return static_cast<float>(sign * std::pow(2.0, -6) * (m / 8.0));
  return static_cast<float>(sign * std::pow(2.0, e - 7) * (1.0 + m / 8.0));
}

float SpecE5M2(int code) {
  const int s = code >> 7, e = (code >> 2) & 0x1f, m = code & 0x3;
  const double sign = s ? -1.0 : 1.0;
  if (e == 0x1f) {
    return m == 0 ? static_cast<float>(sign * INFINITY) : std::numeric_limits<float>::quiet_NaN();
  }
  if (e == 0) return static_cast<float>(sign * std::pow(2.0, -14) * (m / 4.0));
  return static_cast<float>(sign * std::pow(2.0, e - 15) * (1.0 + m / 4.0));
}

struct Spec {
  const Float8Format& format;
  float (*decode)(int);
  float max_finite;
  int nans;
};
const Spec kSpecs[] = {{kE4M3, SpecE4M3, 448.0f, 2}, {kE5M2, SpecE5M2, 57344.0f, 6}};

TEST(Float8Cast, EveryCodeDecodesAsTheSpecSays) {
  for (const Spec& spec : kSpecs) {
    int nans = 0;
    for (int code = 0; code < 256; ++code) {
      const float expected = spec.decode(code);
      const float actual = DecodeFloat8(static_cast<uint8_t>(code), spec.format);
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(actual)) << "code " << code;
        ++nans;
        continue;
      }
      EXPECT_EQ(actual, expected) << "code " << code;
      EXPECT_EQ(std::signbit(actual), (code & 0x80) != 0) << "code " << code;  // -0 too
    }
    EXPECT_EQ(nans, spec.nans);
  }
}

// The finite codes' values in increasing order (non-negative, +0 once), by the spec.
std::vector<std::pair<float, int>> PositiveCodes(const Spec& spec) {
  std::vector<std::pair<float, int>> codes;
  for (int code = 0; code < 128; ++code) {
    const float v = spec.decode(code);
    if (std::isfinite(v)) codes.emplace_back(v, code);
  }
  std::sort(codes.begin(), codes.end());
  return codes;
}

// Encoding rounds to the nearest code; a tie goes to the even code (mantissa ending in 0).
TEST(Float8Cast, EncodesToTheNearestCodeTiesToEven) {
  for (const Spec& spec : kSpecs) {
    const auto codes = PositiveCodes(spec);
    for (size_t i = 0; i < codes.size(); ++i) {
      const auto [value, code] = codes[i];
      EXPECT_EQ(EncodeFloat8(value, spec.format), code) << value;
      EXPECT_EQ(EncodeFloat8(-value, spec.format), code | 0x80) << -value;
      if (i + 1 == codes.size()) continue;
      const auto [next, next_code] = codes[i + 1];
      const float middle = (value + next) / 2;  // exact: both are short binary fractions
      const int even = (code & 1) == 0 ? code : next_code;
      EXPECT_EQ(EncodeFloat8(middle, spec.format), even) << "tie " << middle;
      EXPECT_EQ(EncodeFloat8(-middle, spec.format), even | 0x80) << "tie " << -middle;
      EXPECT_EQ(EncodeFloat8(std::nextafter(middle, 0.0f), spec.format), code) << middle;
      EXPECT_EQ(EncodeFloat8(std::nextafter(middle, INFINITY), spec.format), next_code) << middle;
    }
  }
}

TEST(Float8Cast, RandomValuesEncodeToTheNearestCode) {
  std::mt19937 random(11);
  for (const Spec& spec : kSpecs) {
    const auto codes = PositiveCodes(spec);
    std::uniform_real_distribution<float> exponent(-20.0f, std::log2(spec.max_finite));
    for (int i = 0; i < 20000; ++i) {
      const float x = std::exp2(exponent(random));
      const uint8_t code = EncodeFloat8(x, spec.format);
      const double error = std::fabs(static_cast<double>(spec.decode(code)) - x);
      for (const auto& [value, other] : codes) {
        EXPECT_LE(error, std::fabs(static_cast<double>(value) - x)) << x << " vs code " << other;
      }
    }
  }
}

TEST(Float8Cast, SaturatesAndKeepsNaN) {
  for (const Spec& spec : kSpecs) {
    const int max_code = EncodeFloat8(spec.max_finite, spec.format);
    EXPECT_EQ(spec.decode(max_code), spec.max_finite);
    for (const float big : {spec.max_finite * 1.01f, spec.max_finite * 1.2f, 1e30f, INFINITY}) {
      EXPECT_EQ(EncodeFloat8(big, spec.format), max_code) << big;
      EXPECT_EQ(EncodeFloat8(-big, spec.format), max_code | 0x80) << -big;
    }
    EXPECT_TRUE(std::isnan(spec.decode(EncodeFloat8(NAN, spec.format))));
    EXPECT_TRUE(std::isnan(spec.decode(EncodeFloat8(-NAN, spec.format))));
    // Below half the smallest subnormal: zero, with the sign kept.
    const float tiny = spec.decode(1);
    EXPECT_EQ(EncodeFloat8(tiny * 0.49f, spec.format), 0);
    EXPECT_EQ(EncodeFloat8(-tiny * 0.49f, spec.format), 0x80);
  }
}

// The CPU's vectorized encoder (core/cpu/float8_encode.h) is EncodeFloat8 exactly, on every one
// of the 2^32 f32 bit patterns (both zeros, subnormals, ties, saturation, every NaN payload), run
// through the vector path in chunks of 2^16 consecutive patterns, on every thread. EncodeFloat8
// rounds to the nearest code, so for one sign it is monotone in the bits: where a chunk without
// NaNs has one code at both ends, every pattern in it has that code, and the chunk is compared
// with it; every other chunk (a code boundary or a NaN inside) is compared pattern by pattern.
TEST(Float8Cast, TheRowEncoderIsTheScalarEncoderOnEveryFloat) {
  constexpr int64_t kChunk = int64_t{1} << 16, kChunks = (int64_t{1} << 32) / kChunk;
  for (const Spec& spec : kSpecs) {
    int64_t mismatches = 0, chunks_by_pattern = 0;
    int64_t first_mismatch = -1;
#pragma omp parallel reduction(+ : mismatches, chunks_by_pattern)
    {
      std::vector<float> values(kChunk);
      std::vector<uint8_t> codes(kChunk);
#pragma omp for schedule(dynamic, 64)
      for (int64_t chunk = 0; chunk < kChunks; ++chunk) {
        const uint32_t first = static_cast<uint32_t>(chunk * kChunk);
        for (uint32_t i = 0; i < kChunk; ++i) values[i] = std::bit_cast<float>(first + i);
        EncodeFloat8Scaled(values.data(), 1.0f, kChunk, spec.format, codes.data());
        const bool has_nan = ((first >> 16) & 0x7fffu) >= 0x7f80u;  // exponent all ones
        const uint8_t low = EncodeFloat8(values.front(), spec.format);
        int32_t wrong = 0;  // 32 bits: the counting loops vectorize 4 lanes wider than in 64
        int64_t wrong_at = -1;
        if (!has_nan && low == EncodeFloat8(values.back(), spec.format)) {
#pragma omp simd reduction(+ : wrong)
          for (uint32_t i = 0; i < kChunk; ++i) wrong += codes[i] != low;
          if (wrong != 0)
            wrong_at =
                std::find_if(codes.begin(), codes.end(), [&](uint8_t c) { return c != low; }) -
                codes.begin();
        } else {
          ++chunks_by_pattern;
          for (int64_t i = kChunk - 1; i >= 0; --i) {
            if (codes[i] == EncodeFloat8(values[i], spec.format)) continue;
            ++wrong;
            wrong_at = i;
          }
        }
        mismatches += wrong;
        if (wrong != 0) {
#pragma omp critical
          first_mismatch = first_mismatch < 0 ? chunk * kChunk + wrong_at
                                              : std::min(first_mismatch, chunk * kChunk + wrong_at);
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << "max finite " << spec.max_finite << ": the first at bits 0x"
                             << std::hex << first_mismatch;
    // The boundaries between codes and the NaNs: at least one chunk per positive code.
    EXPECT_GT(chunks_by_pattern, 127) << spec.max_finite;
  }
}

// The scale multiplies before the rounding, in f32: a value just off a tie lands on the tie.
TEST(Float8Cast, TheRowEncoderScalesInF32BeforeRounding) {
  for (const Spec& spec : kSpecs) {
    std::mt19937 random(5);
    std::uniform_real_distribution<float> exponent(-30.0f, 30.0f);
    std::vector<float> values(1000);
    for (float& v : values) v = (random() & 1 ? -1.0f : 1.0f) * std::exp2(exponent(random));
    values[0] = NAN;
    values[1] = -0.0f;
    for (const float scale : {1.0f, 0.75f, 3.0f, 1.0f / 1024, 65536.0f, INFINITY}) {
      std::vector<uint8_t> codes(values.size());
      EncodeFloat8Scaled(values.data(), scale, static_cast<int64_t>(values.size()), spec.format,
                         codes.data());
      for (size_t i = 0; i < values.size(); ++i) {
        EXPECT_EQ(codes[i], EncodeFloat8(values[i] * scale, spec.format))
            << values[i] << " x " << scale;
      }
    }
  }
}

// Each plugin's recipe, as torchao's Float8LinearConfig.from_recipe_name builds it.
std::unique_ptr<Float8Plugin> Make(const std::string& name, std::vector<std::string> filter) {
  static auto registry = std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value();
  auto plugin = std::move(registry->Create<Float8Plugin>(name)).value();
  const ConfigView config("float8", {{"filter_fqns", {ConfigValue(std::move(filter)), "t.toml"}}});
  EXPECT_TRUE(plugin->Configure(config).ok());
  return plugin;
}

void ExpectCast(const Float8Cast& cast, DType dtype, Float8Granularity granularity) {
  EXPECT_EQ(cast.dtype, dtype);
  EXPECT_EQ(cast.granularity, granularity);
}

constexpr auto kTensor = Float8Granularity::kTensor;
constexpr auto kRow = Float8Granularity::kRow;

TEST(Float8Recipes, TensorwiseScalesPerTensorWithE5M2Gradients) {
  const Float8Recipe r = Make("tensorwise", {})->Recipe();
  ExpectCast(r.output.a, DType::kF8E4M3, kTensor);
  ExpectCast(r.output.b, DType::kF8E4M3, kTensor);
  ExpectCast(r.grad_input.a, DType::kF8E5M2, kTensor);
  ExpectCast(r.grad_input.b, DType::kF8E4M3, kTensor);
  ExpectCast(r.grad_weight.a, DType::kF8E5M2, kTensor);
  ExpectCast(r.grad_weight.b, DType::kF8E4M3, kTensor);
  EXPECT_FALSE(r.output.high_precision || r.grad_input.high_precision ||
               r.grad_weight.high_precision);
  EXPECT_FALSE(r.power_of_two_scales);
}

TEST(Float8Recipes, RowwiseScalesPerRowInE4M3WithPowerOfTwoScales) {
  const Float8Recipe r = Make("rowwise", {})->Recipe();
  for (const Float8GemmRecipe* gemm : {&r.output, &r.grad_input, &r.grad_weight}) {
    EXPECT_FALSE(gemm->high_precision);
    ExpectCast(gemm->a, DType::kF8E4M3, kRow);
    ExpectCast(gemm->b, DType::kF8E4M3, kRow);
  }
  EXPECT_TRUE(r.power_of_two_scales);
}

TEST(Float8Recipes, RowwiseWithGwHpKeepsTheWeightGradientInHighPrecision) {
  const Float8Recipe r = Make("rowwise_with_gw_hp", {})->Recipe();
  ExpectCast(r.output.a, DType::kF8E4M3, kRow);
  ExpectCast(r.output.b, DType::kF8E4M3, kRow);
  ExpectCast(r.grad_input.a, DType::kF8E4M3, kRow);
  ExpectCast(r.grad_input.b, DType::kF8E4M3, kTensor);  // torchao: the weight tensorwise here
  EXPECT_FALSE(r.output.high_precision || r.grad_input.high_precision);
  EXPECT_TRUE(r.grad_weight.high_precision);
  EXPECT_TRUE(r.power_of_two_scales);
}

TEST(Float8Recipes, FilterFqnsKeepsMatchingLayersInHighPrecision) {
  for (const std::string name : {"tensorwise", "rowwise", "rowwise_with_gw_hp"}) {
    auto filtered = Make(name, {"output", "feed_forward.w2"});
    EXPECT_FALSE(filtered->Converts("output")) << name;
    EXPECT_FALSE(filtered->Converts("layers.3.feed_forward.w2")) << name;
    EXPECT_TRUE(filtered->Converts("layers.3.feed_forward.w1")) << name;
    EXPECT_TRUE(Make(name, {})->Converts("output")) << name;
  }
}

}  // namespace
}  // namespace titan::float8
