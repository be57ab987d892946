#include "core/tensor/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/tensor/internal/grad_check.h"

namespace titan {
namespace {

TEST(CrossEntropyTest, LossIsMeanNegativeLogLikelihood) {
  std::vector<double> logits = {0, std::log(3.0), 5, 5};
  std::vector<int32_t> targets = {1, 0};
  std::vector<double> lse(2);
  const double loss = CrossEntropyForward(lse.data(), logits.data(), targets.data(), 2, 2);
  EXPECT_NEAR(loss, (-std::log(0.75) + -std::log(0.5)) / 2, 1e-15);
}

TEST(CrossEntropyTest, BackwardMatchesFiniteDifferencesAndIgnoresRows) {
  const int64_t n = 4, v = 9;
  auto logits = internal::RandomVector(n * v, 1, 2.0);
  std::vector<int32_t> targets = {3, kIgnoreIndex, 0, 8};
  std::vector<double> lse(n);
  auto loss = [&] { return CrossEntropyForward(lse.data(), logits.data(), targets.data(), n, v); };
  loss();
  std::vector<double> dlogits = logits;  // in place, as the model uses it
  CrossEntropyBackward(dlogits.data(), dlogits.data(), lse.data(), targets.data(), n, v, 2.0);
  for (double& g : dlogits) g /= 2.0;
  EXPECT_LT(internal::MaxGradientError(loss, logits, dlogits), 1e-8);
  for (int64_t j = 0; j < v; ++j) EXPECT_EQ(dlogits[v + j], 0.0);
}

}  // namespace
}  // namespace titan
