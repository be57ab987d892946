// The CPU compute's mixture-of-experts kernels on small cases worked by hand: the router's order,
// ties, bias and groups; the permutation's edge cases; dispatch and combine and their gradients;
// and the errors for ids and slots out of range. tests/reference/moe_reference_test.cc compares
// every kernel with PyTorch on random inputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/cpu/cpu_compute.h"
#include "titan/float16.h"

namespace titan {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

TensorView F32(std::vector<float>& v, std::vector<int64_t> shape) {
  return TensorView{v.data(), DType::kF32, Device{}, std::move(shape), {}};
}
TensorView I32(std::vector<int32_t>& v, std::vector<int64_t> shape) {
  return TensorView{v.data(), DType::kI32, Device{}, std::move(shape), {}};
}

struct Routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

// Routes the n = logits.size() / e tokens; bias empty: none.
Routed Route(std::vector<float> logits, int64_t e, std::vector<float> bias,
             const MoeRouting& routing) {
  const int64_t n = static_cast<int64_t>(logits.size()) / e, k = routing.top_k;
  Routed routed{std::vector<int32_t>(n * k, -1), std::vector<float>(n * k, -1.0f)};
  const TensorView bias_view = bias.empty() ? TensorView{} : F32(bias, {e});
  const absl::Status status =
      CpuCompute::Get().MoeRoute(F32(logits, {n, e}), bias_view, routing,
                                 I32(routed.experts, {n, k}), F32(routed.weights, {n, k}));
  EXPECT_TRUE(status.ok()) << status;
  return routed;
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(CpuMoe, SoftmaxRoutingPicksTheLargestInOrderWithTiesToTheLowerIndex) {
  const std::vector<float> logits = {0.5f, 2.0f, 1.0f, 2.0f, -1.0f,  // a tie at the top
                                     0.0f, 0.0f, 0.0f, 0.0f, 0.0f};  // all tied
  double sum = 0;
  for (int e = 0; e < 5; ++e) sum += std::exp(logits[e]);
  const double s1 = std::exp(2.0) / sum, s2 = std::exp(1.0) / sum;
  const Routed routed = Route(logits, 5, {}, {.top_k = 3});
  EXPECT_THAT(routed.experts, ElementsAre(1, 3, 2, 0, 1, 2));
  const double chosen = 2 * s1 + s2;
  const std::vector<double> want = {s1 / chosen, s1 / chosen, s2 / chosen,
                                    1 / 3.0,     1 / 3.0,     1 / 3.0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(routed.weights[i], want[i], 1e-7) << i;
  // Without normalization, the scores themselves, times the scale.
  const Routed scaled = Route(logits, 5, {}, {.top_k = 2, .normalize = false, .scale = 2.5f});
  EXPECT_THAT(scaled.experts, ElementsAre(1, 3, 0, 1));
  EXPECT_NEAR(scaled.weights[0], 2.5 * s1, 1e-7);
  EXPECT_NEAR(scaled.weights[2], 2.5 * 0.2, 1e-7);
}

TEST(CpuMoe, TheBiasMovesTheChoiceButNotTheWeights) {
  const std::vector<float> logits = {1.0f, 0.5f, -0.5f, 2.0f};
  const MoeRouting routing{
      .score = MoeRouting::Score::kSigmoid, .top_k = 2, .normalize = false, .scale = 1.0f};
  const Routed plain = Route(logits, 4, {}, routing);
  EXPECT_THAT(plain.experts, ElementsAre(3, 0));
  EXPECT_NEAR(plain.weights[0], Sigmoid(2.0), 1e-7);
  EXPECT_NEAR(plain.weights[1], Sigmoid(1.0), 1e-7);
  const Routed biased = Route(logits, 4, {0.0f, 0.0f, 3.0f, 0.0f}, routing);
  EXPECT_THAT(biased.experts, ElementsAre(2, 3));
  EXPECT_NEAR(biased.weights[0], Sigmoid(-0.5), 1e-7);  // the unbiased score
  EXPECT_NEAR(biased.weights[1], Sigmoid(2.0), 1e-7);
}

// Logits of zero (every sigmoid score 0.5) and a bias that sets each choice value: 8 experts in 4
// groups of 2 whose top-two sums are 0.9, 1.0, 0.85 and 1.2.
TEST(CpuMoe, GroupLimitingKeepsTheBestGroupsByTheirTopTwo) {
  const std::vector<float> logits(8, 0.0f);
  const std::vector<float> bias = {0.4f, -0.5f, 0.0f, 0.0f, 0.35f, -0.5f, 0.1f, 0.1f};
  MoeRouting routing{.score = MoeRouting::Score::kSigmoid, .top_k = 2, .groups = 1};
  // Ungrouped: the two best experts, 0 (0.9) and 4 (0.85).
  EXPECT_THAT(Route(logits, 8, bias, routing).experts, ElementsAre(0, 4));
  // Groups 3 and 1 (1.2 and 1.0): expert 0's group, 0.9, is out although it has the best expert.
  routing.groups = 4;
  routing.groups_chosen = 2;
  const Routed grouped = Route(logits, 8, bias, routing);
  EXPECT_THAT(grouped.experts, ElementsAre(6, 7));
  EXPECT_THAT(grouped.weights, ElementsAre(0.5f, 0.5f));
  routing.groups_chosen = 3;
  EXPECT_THAT(Route(logits, 8, bias, routing).experts, ElementsAre(0, 6));
  // Groups 0 and 2 tied at 0.9: the lower index is chosen.
  std::vector<float> tied = bias;
  tied[4] = 0.4f;
  routing.top_k = 3;
  EXPECT_THAT(Route(logits, 8, tied, routing).experts, ElementsAre(0, 6, 7));
}

TEST(CpuMoe, NormalizedWeightsSumToTheRouteScale) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> logits(16 * 8);
  for (float& v : logits) v = normal(rng);
  const Routed routed = Route(logits, 8, {},
                              {.score = MoeRouting::Score::kSigmoid,
                               .top_k = 3,
                               .scale = 2.5f,
                               .groups = 4,
                               .groups_chosen = 2});
  for (int t = 0; t < 16; ++t) {
    EXPECT_NEAR(routed.weights[t * 3] + routed.weights[t * 3 + 1] + routed.weights[t * 3 + 2], 2.5,
                1e-6);
    EXPECT_GE(routed.weights[t * 3], routed.weights[t * 3 + 1]);
    EXPECT_GE(routed.weights[t * 3 + 1], routed.weights[t * 3 + 2]);
  }
}

struct Permuted {
  std::vector<int32_t> counts, slots;
};

Permuted Permute(std::vector<int32_t> experts, int64_t e) {
  Permuted p{std::vector<int32_t>(e, -1), std::vector<int32_t>(experts.size(), -1)};
  const int64_t m = static_cast<int64_t>(experts.size());
  const absl::Status status =
      CpuCompute::Get().MoePermute(I32(experts, {m}), I32(p.counts, {e}), I32(p.slots, {m}));
  EXPECT_TRUE(status.ok()) << status;
  return p;
}

TEST(CpuMoe, PermuteSortsAssignmentsByExpertStably) {
  // Three tokens of two experts; expert 3 gets none.
  Permuted p = Permute({2, 0, 2, 1, 0, 2}, 4);
  EXPECT_THAT(p.counts, ElementsAre(2, 1, 3, 0));
  EXPECT_THAT(p.slots, ElementsAre(3, 0, 4, 2, 1, 5));
  // Every token to one expert.
  p = Permute({1, 1, 1, 1}, 3);
  EXPECT_THAT(p.counts, ElementsAre(0, 4, 0));
  EXPECT_THAT(p.slots, ElementsAre(0, 1, 2, 3));
  // k = E: each token to every expert.
  p = Permute({2, 0, 1, 1, 2, 0}, 3);
  EXPECT_THAT(p.counts, ElementsAre(2, 2, 2));
  EXPECT_THAT(p.slots, ElementsAre(4, 0, 2, 3, 5, 1));
  // One expert.
  p = Permute({0, 0, 0}, 1);
  EXPECT_THAT(p.counts, ElementsAre(3));
  EXPECT_THAT(p.slots, ElementsAre(0, 1, 2));
  // No tokens.
  p = Permute({}, 2);
  EXPECT_THAT(p.counts, ElementsAre(0, 0));
}

TEST(CpuMoe, PermuteRefusesAnExpertOutOfRange) {
  for (int32_t bad : {4, -1}) {
    std::vector<int32_t> experts = {0, bad, 1}, counts(4), slots(3);
    EXPECT_EQ(CpuCompute::Get()
                  .MoePermute(I32(experts, {3}), I32(counts, {4}), I32(slots, {3}))
                  .message(),
              "MoePermute: operand 'experts' holds expert " + std::to_string(bad) +
                  " at assignment 1, outside [0, 4)");
  }
}

// Two tokens of k = 2 to experts {1, 0} and {1, 1}: slots {1, 0, 2, 3}.
TEST(CpuMoe, DispatchAndCombineMoveRowsAndTheirGradients) {
  Compute& cpu = CpuCompute::Get();
  std::vector<int32_t> slots = {1, 0, 2, 3};
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, out(12, -1.0f);
  ASSERT_TRUE(cpu.MoeDispatch(F32(x, {2, 3}), I32(slots, {4}), F32(out, {4, 3})).ok());
  EXPECT_THAT(out, ElementsAre(1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6));
  // bf16 rows move as they are.
  std::vector<uint16_t> x16 = {F32ToBf16(1.5f), F32ToBf16(-3.0f), F32ToBf16(7.0f),
                               F32ToBf16(0.1f), F32ToBf16(2.0f),  F32ToBf16(-0.5f)};
  std::vector<uint16_t> out16(12);
  ASSERT_TRUE(cpu.MoeDispatch({x16.data(), DType::kBF16, Device{}, {2, 3}, {}}, I32(slots, {4}),
                              {out16.data(), DType::kBF16, Device{}, {4, 3}, {}})
                  .ok());
  EXPECT_THAT(out16, ElementsAre(x16[0], x16[1], x16[2], x16[0], x16[1], x16[2], x16[3], x16[4],
                                 x16[5], x16[3], x16[4], x16[5]));
  // dx accumulates each token's rows.
  std::vector<float> d_rows = {1, 2, 3, 10, 20, 30, 100, 200, 300, 1000, 2000, 3000};
  std::vector<float> dx = {0.5f, 0.5f, 0.5f, 0, 0, 0};
  ASSERT_TRUE(cpu.MoeDispatchBackward(F32(d_rows, {4, 3}), I32(slots, {4}), F32(dx, {2, 3})).ok());
  EXPECT_THAT(dx, ElementsAre(11.5f, 22.5f, 33.5f, 1100, 2200, 3300));
  // out[t] += sum_j weights[t, j] y[slots[t k + j]].
  std::vector<float> y = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<float> weights = {0.25f, 0.75f, 0.5f, 0.5f}, combined = {1, 1, 1, 0, 0, 0};
  ASSERT_TRUE(
      cpu.MoeCombine(F32(y, {4, 3}), F32(weights, {2, 2}), I32(slots, {4}), F32(combined, {2, 3}))
          .ok());
  // Token 0: 0.25 y[1] + 0.75 y[0]; token 1: 0.5 y[2] + 0.5 y[3].
  EXPECT_THAT(combined, ElementsAre(1 + 1.75f, 1 + 2.75f, 1 + 3.75f, 8.5f, 9.5f, 10.5f));
  // d_y[slots[a]] = weights[a] d_out[t]; d_weights[a] = d_out[t] . y[slots[a]].
  std::vector<float> d_out = {1, 0, 2, -1, 1, 0};
  std::vector<float> d_y(12, -7.0f), d_weights(4, -7.0f);
  ASSERT_TRUE(cpu.MoeCombineBackward(F32(d_out, {2, 3}), F32(y, {4, 3}), F32(weights, {2, 2}),
                                     I32(slots, {4}), F32(d_y, {4, 3}), F32(d_weights, {2, 2}))
                  .ok());
  EXPECT_THAT(d_y, ElementsAre(0.75f, 0, 1.5f, 0.25f, 0, 0.5f, -0.5f, 0.5f, 0, -0.5f, 0.5f, 0));
  EXPECT_THAT(d_weights, ElementsAre(16, 7, 1, 1));
}

// The weights' gradient over many features: the dot product, summed in f32 in the fixed order.
TEST(CpuMoe, CombineBackwardDotsOverManyFeatures) {
  const int64_t n = 3, k = 2, d = 75;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> d_out(n * d), y(n * k * d), weights(n * k, 1.0f);
  for (float& v : d_out) v = normal(rng);
  for (float& v : y) v = normal(rng);
  std::vector<int32_t> slots = {5, 0, 3, 1, 2, 4};
  std::vector<float> d_y(y.size()), d_weights(n * k);
  ASSERT_TRUE(CpuCompute::Get()
                  .MoeCombineBackward(F32(d_out, {n, d}), F32(y, {n * k, d}), F32(weights, {n, k}),
                                      I32(slots, {n * k}), F32(d_y, {n * k, d}),
                                      F32(d_weights, {n, k}))
                  .ok());
  for (int64_t a = 0; a < n * k; ++a) {
    double dot = 0;
    for (int64_t c = 0; c < d; ++c) dot += double(d_out[(a / k) * d + c]) * y[slots[a] * d + c];
    EXPECT_NEAR(d_weights[a], dot, 1e-5) << a;
  }
}

TEST(CpuMoe, SlotsThatAreNotAPermutationAreRefused) {
  Compute& cpu = CpuCompute::Get();
  std::vector<float> x(6), out(12), weights(4);
  std::vector<int32_t> repeated = {0, 1, 1, 3}, outside = {0, 1, 2, 4};
  EXPECT_EQ(cpu.MoeDispatch(F32(x, {2, 3}), I32(repeated, {4}), F32(out, {4, 3})).message(),
            "MoeDispatch: operand 'slots' holds 1 at assignment 2, a second time: not a "
            "permutation of the 4 rows (MoePermute's)");
  EXPECT_EQ(
      cpu.MoeCombine(F32(out, {4, 3}), F32(weights, {2, 2}), I32(outside, {4}), F32(x, {2, 3}))
          .message(),
      "MoeCombine: operand 'slots' holds 4 at assignment 3, outside [0, 4): not a permutation of "
      "the 4 rows (MoePermute's)");
  std::vector<float> logits(8), d_weights(4), d_logits(8);
  std::vector<int32_t> experts = {0, 1, 3, 4};
  EXPECT_EQ(cpu.MoeRouteBackward(F32(logits, {2, 4}), I32(experts, {2, 2}), F32(d_weights, {2, 2}),
                                 {.top_k = 2}, F32(d_logits, {2, 4}))
                .message(),
            "MoeRouteBackward: operand 'experts' holds expert 4 at assignment 3, outside [0, 4)");
}

TEST(CpuMoe, ARoutingThatDoesNotFitTheExpertsIsRefused) {
  std::vector<float> logits(8), weights(8);
  std::vector<int32_t> experts(8);
  const auto route = [&](const MoeRouting& routing) {
    return std::string(
        CpuCompute::Get()
            .MoeRoute(F32(logits, {1, 8}), {}, routing, I32(experts, {8}), F32(weights, {8}))
            .message());
  };
  EXPECT_EQ(route({.top_k = 9}), "MoeRoute: routing.top_k 9 must be in [1, 8] (the experts)");
  EXPECT_EQ(route({.top_k = 2, .groups = 3}),
            "MoeRoute: routing.groups 3 must divide the 8 experts");
  EXPECT_EQ(route({.top_k = 2, .groups = 4, .groups_chosen = 5}),
            "MoeRoute: routing.groups_chosen 5 must be in [1, 4] (the groups)");
  EXPECT_EQ(route({.top_k = 5, .groups = 4, .groups_chosen = 2}),
            "MoeRoute: routing.top_k 5 exceeds the 4 experts of the 2 groups chosen");
  EXPECT_EQ(route({.top_k = 2}), "MoeRoute: operand 'experts' expected 2 elements, found 8");
}

}  // namespace
}  // namespace titan
