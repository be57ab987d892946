#include "core/tensor/cross_entropy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

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

// Two "ranks" holding columns [0, 3) and [3, 7) of each row: reducing their pieces (max, then
// sums) gives the whole rows' loss, and each rank's backward is its columns of the whole one.
TEST(CrossEntropyTest, VocabularyParallelPiecesMatchTheWholeRows) {
  const int64_t n = 3, v = 7, split = 3;
  std::vector<float> logits(n * v);
  for (int64_t i = 0; i < n * v; ++i) logits[i] = std::sin(0.7f * i) * 3;
  const std::vector<int32_t> targets = {1, 5, kIgnoreIndex};
  std::vector<float> lse(n);
  const float whole = CrossEntropyForward(lse.data(), logits.data(), targets.data(), n, v);
  std::vector<float> dwhole(n * v);
  CrossEntropyBackward(dwhole.data(), logits.data(), lse.data(), targets.data(), n, v, 1.0f);

  struct Part {
    int64_t first, width;
    std::vector<float> logits, max, sum, target;
  } parts[2] = {{0, split, {}, {}, {}, {}}, {split, v - split, {}, {}, {}, {}}};
  for (Part& part : parts) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < part.width; ++j)
        part.logits.push_back(logits[i * v + part.first + j]);
    }
    part.max.resize(n), part.sum.resize(n), part.target.resize(n);
    CrossEntropyRowMax(part.max.data(), part.logits.data(), n, part.width);
  }
  std::vector<float> max(n), sum(n, 0.0f), target(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) max[i] = std::max(parts[0].max[i], parts[1].max[i]);
  for (Part& part : parts) {
    CrossEntropySumExp(part.sum.data(), part.logits.data(), max.data(), n, part.width);
    CrossEntropyTargetLogit(part.target.data(), part.logits.data(), targets.data(), n, part.width,
                            part.first);
    for (int64_t i = 0; i < n; ++i) sum[i] += part.sum[i], target[i] += part.target[i];
  }
  EXPECT_NEAR(CrossEntropyFinish(sum.data(), max.data(), target.data(), targets.data(), n), whole,
              1e-6);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(sum[i], lse[i], 1e-6);
  for (Part& part : parts) {
    std::vector<float> grad(n * part.width);
    CrossEntropyBackward(grad.data(), part.logits.data(), sum.data(), targets.data(), n, part.width,
                         1.0f, part.first);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < part.width; ++j) {
        EXPECT_NEAR(grad[i * part.width + j], dwhole[i * v + part.first + j], 1e-7)
            << i << " " << j;
      }
    }
  }
}

}  // namespace
}  // namespace titan
