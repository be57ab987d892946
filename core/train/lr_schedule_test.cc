#include "core/train/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace titan {
namespace {

TEST(LrSchedule, WarmupStableLinearDecay) {
  // 10 steps: 2 warmup, 8 * 0.5 = 5 decay, 3 stable.
  LrSchedule s(10, 2, 0.5, "linear", 0.0);
  const double expected[] = {0.5, 1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2, 0.0};
  for (int step = 1; step <= 10; ++step) EXPECT_DOUBLE_EQ(s.Factor(step), expected[step - 1]);
}

TEST(LrSchedule, DecayCappedToTheStepsAfterWarmupWithMinFactor) {
  LrSchedule s(10, 2, 1.0, "linear", 0.1);  // decay_ratio 1 decays right after warmup
  EXPECT_DOUBLE_EQ(s.Factor(2), 1.0);
  EXPECT_DOUBLE_EQ(s.Factor(3), 0.1 + 0.9 * (1.0 - 1.0 / 8));
  EXPECT_DOUBLE_EQ(s.Factor(10), 0.1);
}

TEST(LrSchedule, CosineSqrtAndConstant) {
  LrSchedule cosine(5, 0, 1.0, "cosine", 0.0);
  for (int step = 1; step <= 5; ++step) {
    EXPECT_NEAR(cosine.Factor(step), 0.5 * (1 + std::cos(std::numbers::pi * step / 5)), 1e-12);
  }
  LrSchedule sqrt(5, 1, 1.0, "sqrt", 0.0);
  EXPECT_DOUBLE_EQ(sqrt.Factor(1), 1.0);
  EXPECT_NEAR(sqrt.Factor(2), 1 - std::sqrt(0.25), 1e-12);
  LrSchedule constant(5, 1, 1.0, "constant", 0.0);
  EXPECT_DOUBLE_EQ(constant.Factor(5), 1.0);
}

}  // namespace
}  // namespace titan
