// The SGD update, the cross-entropy's row maximum and the sum of squares (vector_kernels.h) against
// their scalar references on each instruction set this CPU runs (the fixture and its
// instantiation: vector_kernels_test_support.h, vector_kernels_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/tensor/cross_entropy.h"
#include "core/tensor/sgd.h"
#include "core/tensor/vector_kernels.h"
#include "core/tensor/vector_kernels_test_support.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace titan {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Values over a wide range of magnitudes with edge values mixed in.
std::vector<float> Draw(int64_t n, uint32_t seed) {
  const float edges[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 1e-45f, NAN, kInf, -kInf, 3e38f, -3e38f};
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-30, 10), pick(0, 15);
  std::vector<float> values;
  for (int64_t i = 0; i < n; ++i) {
    const int choice = pick(random);
    values.push_back(choice < static_cast<int>(std::size(edges))
                         ? edges[choice]
                         : std::ldexp(normal(random), scale(random)));
  }
  return values;
}

void ExpectSameSgdUpdate(const SgdUpdate& update, int64_t n) {
  const SgdConstants c = MakeSgdConstants(update);
  std::vector<float> param = Draw(n, 1), grad = Draw(n, 2), buffer = Draw(n, 3);
  std::vector<float> expected_param = param, expected_buffer = buffer;
  VectorSgdUpdate(c, param.data(), grad.data(), buffer.data(), n);
  ScalarSgdUpdate(c, expected_param.data(), grad.data(), expected_buffer.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(SameValue(param[i], expected_param[i]))
        << "param " << i << " of " << n << ": " << param[i] << " vs " << expected_param[i];
    ASSERT_TRUE(SameValue(buffer[i], expected_buffer[i])) << "buffer " << i << " of " << n;
  }
}

TEST_P(VectorKernelsTest, SgdIsTheScalarUpdateBitForBit) {
  SgdUpdate plain;
  plain.lr = 0.1;
  SgdUpdate momentum = plain;
  momentum.momentum = 0.9;
  momentum.dampening = 0.1;
  momentum.weight_decay = 1e-4;
  momentum.step = 4;
  SgdUpdate first = momentum;
  first.step = 1;
  SgdUpdate nesterov = momentum;
  nesterov.dampening = 0;
  nesterov.nesterov = true;
  for (const SgdUpdate& update : {plain, momentum, first, nesterov}) {
    for (int64_t n : kSizes) ExpectSameSgdUpdate(update, n);
  }
}

// The update itself, so that a reference and vector code wrong in the same way cannot pass: a
// step of torch.optim.SGD(lr=0.5, momentum=0.5, weight_decay=0.25), computed by hand.
TEST_P(VectorKernelsTest, SgdMovesAsTorchsSgd) {
  SgdUpdate update;
  update.lr = 0.5;
  update.momentum = 0.5;
  update.weight_decay = 0.25;
  update.step = 2;
  const int64_t n = 37;
  std::vector<float> param(n, 4.0f), grad(n, 1.0f), buffer(n, 2.0f);
  VectorSgdUpdate(MakeSgdConstants(update), param.data(), grad.data(), buffer.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    // g = 1 + 0.25 * 4 = 2; buffer = 0.5 * 2 + 2 = 3; param = 4 - 0.5 * 3.
    EXPECT_EQ(buffer[i], 3.0f) << i;
    EXPECT_EQ(param[i], 2.5f) << i;
  }
  // Without weight decay an infinite weight keeps a finite gradient step, as torch's.
  SgdUpdate no_decay;
  no_decay.lr = 0.5;
  std::vector<float> inf_param(n, kInf), ones(n, 1.0f);
  VectorSgdUpdate(MakeSgdConstants(no_decay), inf_param.data(), ones.data(), nullptr, n);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(inf_param[i], kInf) << i;
}

TEST_P(VectorKernelsTest, RowMaxIsTheReferencesValue) {
  for (int64_t v : kSizes) {
    if (v == 0) continue;
    const int64_t n = 3;
    std::vector<float> logits = Draw(n * v, static_cast<uint32_t>(v));
    logits[0] = NAN;   // row 0 starts with NaN: its maximum is NaN
    logits[v] = 1.0f;  // row 1 starts with a number: NaNs after it are passed over
    if (v > 2) logits[v + 2] = NAN;
    std::vector<float> max(n), expected(n);
    VectorCrossEntropyRowMax(max.data(), logits.data(), n, v);
    for (int64_t i = 0; i < n; ++i) {
      expected[i] = CrossEntropyRowMaxOf(logits.data() + i * v, v);
      EXPECT_TRUE(max[i] == expected[i] || SameValue(max[i], expected[i]))
          << "row " << i << " of " << v << ": " << max[i] << " vs " << expected[i];
    }
    EXPECT_TRUE(std::isnan(max[0])) << v;
    EXPECT_FALSE(std::isnan(max[1])) << v;
  }
}

// The maximum itself: each row of a ramp peaks where the row says, wherever that falls in a vector.
TEST_P(VectorKernelsTest, RowMaxFindsThePeakAnywhere) {
  const int64_t v = 53;
  std::vector<float> logits(v * v);
  for (int64_t i = 0; i < v; ++i) {
    for (int64_t j = 0; j < v; ++j) logits[i * v + j] = -static_cast<float>((j - i) * (j - i));
    logits[i * v + i] = 7.0f;
  }
  logits[5 * v + 9] = -kInf;
  std::vector<float> max(v);
  VectorCrossEntropyRowMax(max.data(), logits.data(), v, v);
  for (int64_t i = 0; i < v; ++i) EXPECT_EQ(max[i], 7.0f) << i;
  std::vector<float> all_low(40, -kInf);
  float low_max = 0.0f;
  VectorCrossEntropyRowMax(&low_max, all_low.data(), 1, 40);
  EXPECT_EQ(low_max, -kInf);
}

double SumOfSquaresInOrder(const std::vector<float>& x) {
  double sum = 0;
  for (float value : x) sum += static_cast<double>(value) * value;
  return sum;
}

TEST_P(VectorKernelsTest, SumOfSquaresIsWithinItsBoundOfTheSumInOrder) {
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t n : kSizes) {
    std::vector<float> x(n);
    for (float& value : x) value = std::ldexp(normal(random), static_cast<int>(random() % 40) - 20);
    const double expected = SumOfSquaresInOrder(x);
    const double sum = VectorSumOfSquares(x.data(), n);
    EXPECT_LE(std::fabs(sum - expected), static_cast<double>(n) * std::ldexp(expected, -52)) << n;
  }
  // Exact where every partial sum is: integers, 1^2 + ... + 1000^2.
  std::vector<float> ramp(1000);
  for (int i = 0; i < 1000; ++i) ramp[i] = static_cast<float>(i + 1);
  EXPECT_EQ(VectorSumOfSquares(ramp.data(), 1000), 1000.0 * 1001.0 * 2001.0 / 6.0);
  std::vector<float> special(40, 1.0f);
  special[20] = -kInf;
  EXPECT_EQ(VectorSumOfSquares(special.data(), 40), std::numeric_limits<double>::infinity());
  special[20] = NAN;
  EXPECT_TRUE(std::isnan(VectorSumOfSquares(special.data(), 40)));
}

#ifdef _OPENMP
// Blocks summed in order: one thread and two give the same bits.
TEST_P(VectorKernelsTest, SumOfSquaresIsTheSameOnAnyThreadCount) {
  const std::vector<float> x = [] {
    std::vector<float> values(5 * 16384 + 11);
    std::mt19937 random(11);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& value : values) value = normal(random);
    return values;
  }();
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = VectorSumOfSquares(x.data(), static_cast<int64_t>(x.size()));
  omp_set_num_threads(2);
  const double two = VectorSumOfSquares(x.data(), static_cast<int64_t>(x.size()));
  omp_set_num_threads(threads);
  EXPECT_EQ(one, two);
}
#endif

}  // namespace
}  // namespace titan
