#include "core/tensor/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/tensor/internal/grad_check.h"

namespace titan {
namespace {

TEST(RopeTest, TableAppliesLlama3Scaling) {
  const int64_t t = 3, hd = 128, half = hd / 2;
  std::vector<double> cos(t * half), sin(t * half), cos_plain(t * half), sin_plain(t * half);
  RopeTable(cos.data(), sin.data(), t, hd, RopeConfig{});
  RopeTable(cos_plain.data(), sin_plain.data(), t, hd, RopeConfig{.scaled = false});
  // High frequencies (wavelength < 8192 / 4) are kept; the lowest (> 8192) are divided by 8.
  EXPECT_EQ(cos[half + 0], cos_plain[half + 0]);
  const double lowest = 1.0 / std::pow(500000.0, 126.0 / 128.0);
  ASSERT_GT(2 * std::numbers::pi / lowest, 8192.0);
  EXPECT_NEAR(sin[half + half - 1], std::sin(lowest / 8), 1e-9);
  EXPECT_NEAR(sin_plain[half + half - 1], std::sin(lowest), 1e-9);
  // In between, the frequency is a smooth blend, strictly inside the two.
  int blended = 0;
  for (int64_t i = 0; i < half; ++i) {
    const double plain = std::asin(sin_plain[half + i]), scaled = std::asin(sin[half + i]);
    if (scaled < plain * (1 - 1e-6) && scaled > plain / 8 * (1 + 1e-6)) ++blended;
  }
  EXPECT_GT(blended, 0);
}

TEST(RopeTest, RotatesPairsAndBackwardMatchesFiniteDifferences) {
  const int64_t b = 2, t = 5, heads = 3, hd = 8, half = hd / 2;
  std::vector<double> cos(t * half), sin(t * half);
  RopeTable(cos.data(), sin.data(), t, hd, RopeConfig{.theta = 10.0});
  auto inp = internal::RandomVector(b * t * heads * hd, 1);
  auto dout = internal::RandomVector(inp.size(), 2);
  std::vector<double> x = inp;
  RopeForward(x.data(), cos.data(), sin.data(), b, t, heads, hd);
  // Position 2, head 1, pair 3 of batch 1 as a complex product.
  const int64_t at = ((1 * t + 2) * heads + 1) * hd + 2 * 3;
  const double re = inp[at], im = inp[at + 1], c = cos[2 * half + 3], s = sin[2 * half + 3];
  EXPECT_NEAR(x[at], re * c - im * s, 1e-15);
  EXPECT_NEAR(x[at + 1], re * s + im * c, 1e-15);
  auto loss = [&] {
    x = inp;
    RopeForward(x.data(), cos.data(), sin.data(), b, t, heads, hd);
    return internal::Dot(x, dout);
  };
  std::vector<double> dx = dout;
  RopeBackward(dx.data(), cos.data(), sin.data(), b, t, heads, hd);
  EXPECT_LT(internal::MaxGradientError(loss, inp, dx), 1e-8);
}

}  // namespace
}  // namespace titan
