// The cross-entropy's kernels (cross_entropy_kernels.cuh) with f32 and bf16 logits and gradients,
// run on the CPU by cuda_emulation.h against CpuCompute: the row maxima and target logits equal
// (one rounding of the same value), the sums and the loss within 1e-5 relative (f64 sums in
// another order, the GPU's expf), the gradient within one bf16 step where it is bf16 and 1e-5
// where it is f32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/cpu/cpu_compute.h"
#include "titan/float16.h"

// The emulation redefines CUDA's qualifiers: it comes after every other header but the kernels'.
#include "cuda_emulation.h"
// The kernels, compiled for the emulation.
#include "cross_entropy_kernels.cuh"

namespace titan::cuda {
namespace {

// n rows of v logits as f32 or bf16, stored as the kernels read them.
struct Logits {
  bool bf16;
  std::vector<float> f32;
  std::vector<uint16_t> bits;
  Logits(bool is_bf16, int64_t count, uint32_t seed) : bf16(is_bf16) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (int64_t i = 0; i < count; ++i) {
      const float x = normal(rng);
      if (bf16) {
        bits.push_back(::titan::F32ToBf16(x));
      } else {
        f32.push_back(x);
      }
    }
  }
  void* data() { return bf16 ? static_cast<void*>(bits.data()) : f32.data(); }
  float at(size_t i) const { return bf16 ? ::titan::Bf16ToF32(bits[i]) : f32[i]; }
  TensorView view(int64_t n, int64_t v) {
    return TensorView{data(), bf16 ? DType::kBF16 : DType::kF32, Device{}, {n, v}, {}};
  }
};

TensorView F32(std::vector<float>& x) {
  return TensorView{x.data(), DType::kF32, Device{}, {static_cast<int64_t>(x.size())}, {}};
}

void ExpectRelative(const std::vector<float>& gpu, const std::vector<float>& cpu, double rel,
                    const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_NEAR(gpu[i], cpu[i], rel * std::fabs(cpu[i]) + 1e-7) << what << " " << i;
  }
}

TEST(CrossEntropyKernelsOnTheCpu, PiecesWithF32AndBf16Logits) {
  // 6 rows of columns [1000, 1300) of the vocabulary: two blocks of columns, the second partial;
  // a target in another shard and an ignored one.
  const int64_t n = 6, v = 300, first = 1000;
  std::vector<int32_t> targets = {1000, 1299, 1150, 7, -100, 1001};
  const TensorView target_view{targets.data(), DType::kI32, Device{}, {n}, {}};
  Compute& cpu = CpuCompute::Get();
  for (bool logits_bf16 : {false, true}) {
    for (bool grad_bf16 : {false, true}) {
      const std::string tag = std::string(logits_bf16 ? "bf16" : "f32") + " logits, " +
                              (grad_bf16 ? "bf16" : "f32") + " gradient";
      Logits logits(logits_bf16, n * v, 1);
      std::vector<float> max(n), sum(n), target(n), loss(1);
      ASSERT_TRUE(cpu.CrossEntropyRowMax(logits.view(n, v), F32(max)).ok());
      ASSERT_TRUE(cpu.CrossEntropySumExp(logits.view(n, v), F32(max), F32(sum)).ok());
      ASSERT_TRUE(
          cpu.CrossEntropyTargetLogit(logits.view(n, v), target_view, first, F32(target)).ok());
      ASSERT_TRUE(
          cpu.CrossEntropyFinish(F32(max), F32(target), target_view, F32(sum), F32(loss)).ok());
      Logits grad(grad_bf16, n * v, 2);
      ASSERT_TRUE(cpu.CrossEntropyBackward(logits.view(n, v), F32(sum), target_view, first, 0.5f,
                                           grad.view(n, v))
                      .ok());

      const ActivationIn in{logits.data(), logits_bf16};
      std::vector<float> g_max(n), g_sum(n), g_target(n), g_loss(1);
      int64_t count = 0;
      emulation::Launcher launch;
      ASSERT_EQ(cross_entropy::RunRowMax(launch, g_max.data(), in, n, v), cudaSuccess);
      ASSERT_EQ(cross_entropy::RunSumExp(launch, g_sum.data(), in, g_max.data(), n, v),
                cudaSuccess);
      ASSERT_EQ(
          cross_entropy::RunTargetLogit(launch, g_target.data(), in, targets.data(), n, v, first),
          cudaSuccess);
      ASSERT_EQ(cross_entropy::RunFinish(launch, g_sum.data(), g_max.data(), g_target.data(),
                                         targets.data(), n, g_loss.data()),
                cudaSuccess);
      Logits g_grad(grad_bf16, n * v, 2);
      ASSERT_EQ(cross_entropy::RunBackward(launch, ActivationOut{g_grad.data(), grad_bf16}, in,
                                           sum.data(), targets.data(), n, v, 0.5f, first, &count),
                cudaSuccess);
      EXPECT_EQ(g_max, max) << tag;
      EXPECT_EQ(g_target, target) << tag;
      ExpectRelative(g_sum, sum, 1e-5, "log-sum-exp, " + tag);
      ExpectRelative(g_loss, loss, 1e-5, "loss, " + tag);
      EXPECT_EQ(count, 5) << tag;  // every row but the ignored one
      int moved = 0;
      for (int64_t i = 0; i < n * v; ++i) {
        const float c = grad.at(i), g = g_grad.at(i);
        const double bound = grad_bf16 ? std::ldexp(std::fabs(c), -7) : 1e-5 * std::fabs(c);
        EXPECT_NEAR(g, c, bound + 1e-9) << "dlogits " << i << ", " << tag;
        moved += c != g;
      }
      if (grad_bf16) {
        EXPECT_LE(moved, n * v / 100) << "dlogits that differ, " << tag;
      }
    }
  }
}

}  // namespace
}  // namespace titan::cuda
