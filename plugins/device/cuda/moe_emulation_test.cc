// The mixture-of-experts kernels' own code, run on the CPU by cuda_emulation.h, bit for bit
// against CpuCompute: routing (softmax and sigmoid, bias, groups) and its backward, the
// permutation over several tiles and with more experts than a block has threads, dispatch (f32
// and bf16), combine and their gradients, each fiber order giving the same bits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_compute.h"
#include "titan/float16.h"

// The emulation redefines CUDA's qualifiers: it comes after every other header but the kernels'.
#include "cuda_emulation.h"
// The kernels, compiled for the emulation.
#include "moe_kernels.cuh"

namespace titan::cuda {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

TensorView F32(std::vector<float>& v, std::vector<int64_t> shape) {
  return TensorView{v.data(), DType::kF32, Device{}, std::move(shape), {}};
}
TensorView I32(std::vector<int32_t>& v, std::vector<int64_t> shape) {
  return TensorView{v.data(), DType::kI32, Device{}, std::move(shape), {}};
}

MoeRoutingArgs ArgsOf(const MoeRouting& r) {
  return {r.score == MoeRouting::Score::kSigmoid,
          r.top_k,
          r.normalize,
          r.scale,
          r.groups,
          r.groups_chosen};
}

// Runs `body` with the fibers in each order.
template <typename Body>
void InEachFiberOrder(const Body& body) {
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "fibers last to first" : "fibers first to last");
    emulation::set_reverse_order(reverse);
    body();
  }
  emulation::set_reverse_order(false);
}

TEST(MoeKernelsOnTheCpu, RoutingAndItsBackwardAreTheCpus) {
  const int64_t n = 300, e = 32;
  const std::vector<MoeRouting> routings = {
      {.score = MoeRouting::Score::kSoftmax, .top_k = 4},
      {.score = MoeRouting::Score::kSoftmax, .top_k = 2, .normalize = false, .scale = 1.5f},
      {.score = MoeRouting::Score::kSigmoid,
       .top_k = 6,
       .scale = 2.5f,
       .groups = 8,
       .groups_chosen = 3},
      {.score = MoeRouting::Score::kSigmoid,
       .top_k = 1,
       .normalize = false,
       .groups = 32,
       .groups_chosen = 5},  // groups of one expert
  };
  std::vector<float> logits = Random(n * e, 1, 2.0f), bias = Random(e, 2, 0.1f);
  for (int64_t i = 0; i < n * e; i += 7) logits[i] = logits[i + 1];  // ties
  const std::vector<float> d_weights_all = Random(n * 6, 3);
  for (const MoeRouting& routing : routings) {
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(absl::StrCat("top_k ", routing.top_k, " groups ", routing.groups,
                                with_bias ? " bias" : ""));
      const int64_t k = routing.top_k;
      std::vector<int32_t> cpu_experts(n * k);
      std::vector<float> cpu_weights(n * k), cpu_d_logits(n * e);
      std::vector<float> d_weights(d_weights_all.begin(), d_weights_all.begin() + n * k);
      Compute& cpu = CpuCompute::Get();
      ASSERT_TRUE(cpu.MoeRoute(F32(logits, {n, e}), with_bias ? F32(bias, {e}) : TensorView{},
                               routing, I32(cpu_experts, {n, k}), F32(cpu_weights, {n, k}))
                      .ok());
      ASSERT_TRUE(cpu.MoeRouteBackward(F32(logits, {n, e}), I32(cpu_experts, {n, k}),
                                       F32(d_weights, {n, k}), routing, F32(cpu_d_logits, {n, e}))
                      .ok());
      InEachFiberOrder([&] {
        std::vector<int32_t> experts(n * k, -1);
        std::vector<float> weights(n * k), d_logits(n * e);
        std::vector<float> scratch(moe::RouteScratchBytes(n, e, routing.groups) / sizeof(float));
        ASSERT_EQ(
            moe::RunRoute(emulation::Launcher{}, logits.data(), with_bias ? bias.data() : nullptr,
                          ArgsOf(routing), n, e, experts.data(), weights.data(), scratch.data()),
            cudaSuccess);
        EXPECT_EQ(experts, cpu_experts);
        EXPECT_EQ(weights, cpu_weights);
        ASSERT_EQ(moe::RunRouteBackward(emulation::Launcher{}, logits.data(), cpu_experts.data(),
                                        d_weights.data(), ArgsOf(routing), n, e, d_logits.data()),
                  cudaSuccess);
        EXPECT_EQ(d_logits, cpu_d_logits);
      });
    }
  }
}

// 700 assignments (three tiles, the last partial) of 10 experts, one of which gets none; and 300
// experts, more than a block's threads.
TEST(MoeKernelsOnTheCpu, PermutationIsTheCpusStableCountingSort) {
  for (int64_t e : {10, 300}) {
    SCOPED_TRACE(absl::StrCat(e, " experts"));
    const int64_t m = 700;
    std::mt19937 rng(4);
    std::vector<int32_t> ids(m);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % (e - 1));  // the last gets none
    std::vector<int32_t> cpu_counts(e), cpu_slots(m);
    ASSERT_TRUE(CpuCompute::Get()
                    .MoePermute(I32(ids, {m}), I32(cpu_counts, {e}), I32(cpu_slots, {m}))
                    .ok());
    InEachFiberOrder([&] {
      std::vector<int32_t> counts(e, -1), slots(m, -1);
      std::vector<int64_t> scratch(moe::PermuteScratchBytes(m, e) / sizeof(int64_t) + 1);
      ASSERT_EQ(moe::RunPermute(emulation::Launcher{}, ids.data(), m, e, counts.data(),
                                slots.data(), scratch.data()),
                cudaSuccess);
      EXPECT_EQ(counts, cpu_counts);
      EXPECT_EQ(slots, cpu_slots);
      EXPECT_THAT(std::vector<int64_t>(scratch.begin(), scratch.begin() + 2),
                  ::testing::ElementsAre(-1, 0));
    });
  }
}

TEST(MoeKernelsOnTheCpu, PermutationReportsTheFirstExpertOutOfRange) {
  const int64_t m = 600, e = 8;
  std::vector<int32_t> ids(m, 3), counts(e), slots(m, -1);
  ids[450] = -2;
  ids[520] = 8;
  std::vector<int64_t> scratch(moe::PermuteScratchBytes(m, e) / sizeof(int64_t) + 1);
  ASSERT_EQ(moe::RunPermute(emulation::Launcher{}, ids.data(), m, e, counts.data(), slots.data(),
                            scratch.data()),
            cudaSuccess);
  EXPECT_EQ(scratch[0], 450);
  EXPECT_EQ(scratch[1], -2);
  EXPECT_EQ(counts[3], m - 2);  // the others are placed; the bad ones are not followed
  EXPECT_EQ(slots[450], -1);
  EXPECT_EQ(slots[599], m - 3);
  // No assignments: zero counts, no error.
  std::vector<int64_t> none(moe::PermuteScratchBytes(0, e) / sizeof(int64_t) + 1, 7);
  ASSERT_EQ(moe::RunPermute(emulation::Launcher{}, ids.data(), 0, e, counts.data(), slots.data(),
                            none.data()),
            cudaSuccess);
  EXPECT_THAT(counts, ::testing::Each(0));
  EXPECT_EQ(none[0], -1);
}

// 130 tokens of k = 3 to 7 experts, 70 features (more than a warp's 32 lanes, not a multiple).
TEST(MoeKernelsOnTheCpu, DispatchCombineAndTheirGradientsAreTheCpus) {
  const int64_t n = 130, k = 3, m = n * k, d = 70, e = 7;
  std::mt19937 rng(5);
  std::vector<int32_t> ids(m), counts(e), slots(m);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % e);
  Compute& cpu = CpuCompute::Get();
  ASSERT_TRUE(cpu.MoePermute(I32(ids, {m}), I32(counts, {e}), I32(slots, {m})).ok());
  std::vector<float> x = Random(n * d, 6), y = Random(m * d, 7), weights = Random(m, 8);
  std::vector<float> d_rows = Random(m * d, 9), d_out = Random(n * d, 10);
  std::vector<float> dx_start = Random(n * d, 11), out_start = Random(n * d, 12);
  std::vector<uint16_t> x16(x.size());
  for (size_t i = 0; i < x.size(); ++i) x16[i] = F32ToBf16(x[i]);

  std::vector<float> cpu_rows(m * d), cpu_dx = dx_start, cpu_out = out_start;
  std::vector<float> cpu_d_y(m * d), cpu_d_weights(m);
  std::vector<uint16_t> cpu_rows16(m * d);
  ASSERT_TRUE(cpu.MoeDispatch(F32(x, {n, d}), I32(slots, {m}), F32(cpu_rows, {m, d})).ok());
  ASSERT_TRUE(cpu.MoeDispatch({x16.data(), DType::kBF16, Device{}, {n, d}, {}}, I32(slots, {m}),
                              {cpu_rows16.data(), DType::kBF16, Device{}, {m, d}, {}})
                  .ok());
  ASSERT_TRUE(
      cpu.MoeDispatchBackward(F32(d_rows, {m, d}), I32(slots, {m}), F32(cpu_dx, {n, d})).ok());
  ASSERT_TRUE(
      cpu.MoeCombine(F32(y, {m, d}), F32(weights, {n, k}), I32(slots, {m}), F32(cpu_out, {n, d}))
          .ok());
  ASSERT_TRUE(cpu.MoeCombineBackward(F32(d_out, {n, d}), F32(y, {m, d}), F32(weights, {n, k}),
                                     I32(slots, {m}), F32(cpu_d_y, {m, d}),
                                     F32(cpu_d_weights, {n, k}))
                  .ok());
  InEachFiberOrder([&] {
    const emulation::Launcher launch;
    std::vector<float> rows(m * d), dx = dx_start, out = out_start, d_y(m * d), d_weights(m);
    std::vector<uint16_t> rows16(m * d);
    ASSERT_EQ(moe::RunDispatch(launch, x.data(), false, slots.data(), rows.data(), n, m, d),
              cudaSuccess);
    ASSERT_EQ(moe::RunDispatch(launch, x16.data(), true, slots.data(), rows16.data(), n, m, d),
              cudaSuccess);
    ASSERT_EQ(moe::RunDispatchBackward(launch, d_rows.data(), slots.data(), dx.data(), n, m, d),
              cudaSuccess);
    ASSERT_EQ(moe::RunCombine(launch, y.data(), weights.data(), slots.data(), out.data(), n, m, d),
              cudaSuccess);
    ASSERT_EQ(moe::RunCombineBackward(launch, d_out.data(), y.data(), weights.data(), slots.data(),
                                      d_y.data(), d_weights.data(), n, m, d),
              cudaSuccess);
    EXPECT_EQ(rows, cpu_rows);
    EXPECT_EQ(rows16, cpu_rows16);
    EXPECT_EQ(dx, cpu_dx);
    EXPECT_EQ(out, cpu_out);
    EXPECT_EQ(d_y, cpu_d_y);
    EXPECT_EQ(d_weights, cpu_d_weights);
  });
}

}  // namespace
}  // namespace titan::cuda
