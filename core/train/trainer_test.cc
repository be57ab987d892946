#include "core/train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace titan {
namespace {

TEST(ClipGradNorm, ScalesToMaxNormAndReportsTheNormBefore) {
  std::vector<float> g = {3.0f, 4.0f};
  EXPECT_DOUBLE_EQ(ClipGradNorm(g.data(), 2, 1.0), 5.0);
  EXPECT_NEAR(std::hypot(g[0], g[1]), 1.0, 1e-6);
  std::vector<float> small = {0.3f, 0.4f};
  EXPECT_NEAR(ClipGradNorm(small.data(), 2, 1.0), 0.5, 1e-7);
  EXPECT_FLOAT_EQ(small[0], 0.3f);  // below max_norm: untouched
  std::vector<float> bad = {NAN, 1.0f};
  EXPECT_FALSE(std::isfinite(ClipGradNorm(bad.data(), 2, 1.0)));
}

}  // namespace
}  // namespace titan
