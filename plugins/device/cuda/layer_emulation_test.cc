// The layer kernels' own code (layer_kernels.cuh, the embedding backward) with f32 and bf16
// activations, run on the CPU by cuda_emulation.h against CpuCompute with the same dtypes. Both
// read bf16 into f32 and round what they write once; their f32 arithmetic may differ in the last
// bits (the GPU's expf, its block sums in another order), so a result may round to the next bf16
// value: each element is within one bf16 step (2^-7 of its magnitude) or 1e-6 of the CPU's, f32
// results within 1e-5 relative.
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
#include "embedding_kernels.cuh"
#include "layer_kernels.cuh"

namespace titan::cuda {
namespace {

// One activation operand twice: the CPU's copy and the emulated GPU's, of one dtype.
struct Act {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<float> cpu_f32, gpu_f32;
  std::vector<uint16_t> cpu_bf16, gpu_bf16;

  Act(bool bf16, std::vector<int64_t> dims, uint32_t seed)
      : dtype(bf16 ? DType::kBF16 : DType::kF32), shape(std::move(dims)) {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    for (int64_t i = 0; i < n; ++i) {
      const float v = uniform(rng);
      if (bf16) {
        cpu_bf16.push_back(::titan::F32ToBf16(v));
      } else {
        cpu_f32.push_back(v);
      }
    }
    gpu_f32 = cpu_f32;
    gpu_bf16 = cpu_bf16;
  }
  void* cpu_data() {
    return cpu_f32.empty() ? static_cast<void*>(cpu_bf16.data()) : cpu_f32.data();
  }
  void* gpu_data() {
    return gpu_f32.empty() ? static_cast<void*>(gpu_bf16.data()) : gpu_f32.data();
  }
  TensorView cpu() { return TensorView{cpu_data(), dtype, Device{}, shape, {}}; }
  ActivationIn in() { return {gpu_data(), dtype == DType::kBF16}; }
  ActivationOut out() { return {gpu_data(), dtype == DType::kBF16}; }
  float cpu_at(size_t i) const {
    return cpu_f32.empty() ? ::titan::Bf16ToF32(cpu_bf16[i]) : cpu_f32[i];
  }
  float gpu_at(size_t i) const {
    return gpu_f32.empty() ? ::titan::Bf16ToF32(gpu_bf16[i]) : gpu_f32[i];
  }
  size_t size() const { return cpu_f32.empty() ? cpu_bf16.size() : cpu_f32.size(); }
};

// A bf16 result rounded from f32 values that differ in their last bits lands on the same bf16
// value but where the f32 values straddle a rounding boundary: at most 1% of the elements may
// differ at all (a kernel that truncated instead of rounding would move about half of them).
void ExpectClose(const Act& x, const std::string& what) {
  const bool bf16 = x.dtype == DType::kBF16;
  int off = 0, moved = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float cpu = x.cpu_at(i), gpu = x.gpu_at(i);
    const float bound =
        bf16 ? std::ldexp(std::fabs(cpu), -7) + 1e-6f : 1e-5f * std::fabs(cpu) + 1e-6f;
    moved += cpu != gpu;
    if (std::fabs(cpu - gpu) > bound && ++off <= 3) {
      ADD_FAILURE() << what << (bf16 ? " (bf16)" : " (f32)") << " element " << i << ": cpu " << cpu
                    << ", emulated gpu " << gpu;
    }
  }
  EXPECT_EQ(off, 0) << what;
  if (bf16) {
    EXPECT_LE(moved, static_cast<int>(x.size() / 100)) << what << ": elements that differ";
  }
}

std::vector<float> Values(int64_t n, uint32_t seed, float low, float high) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = uniform(rng);
  return x;
}

TensorView F32(std::vector<float>& v, std::vector<int64_t> shape) {
  return TensorView{v.data(), DType::kF32, Device{}, std::move(shape), {}};
}

Compute& Cpu() { return CpuCompute::Get(); }

// 5 rows of 300 features: two blocks' worth of columns, the second partial.
constexpr int64_t kRows = 5, kWidth = 300;

// Every combination of the dtypes of up to three groups of operands.
template <typename Test>
void ForEachDtypes(int groups, Test&& test) {
  for (int mask = 0; mask < (1 << groups); ++mask) {
    test((mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0, "dtypes " + std::to_string(mask));
  }
}

TEST(LayerKernelsOnTheCpu, RmsNormWithBf16Activations) {
  ForEachDtypes(3, [](bool x16, bool y16, bool dx16, const std::string& tag) {
    std::vector<float> weight = Values(kWidth, 1, 0.5f, 1.5f), rstd_cpu(kRows), rstd_gpu(kRows);
    Act inp(x16, {kRows, kWidth}, 2), out(y16, {kRows, kWidth}, 3);
    ASSERT_TRUE(Cpu()
                    .RmsNormForward(inp.cpu(), F32(weight, {kWidth}), 1e-5, out.cpu(),
                                    F32(rstd_cpu, {kRows}))
                    .ok());
    ASSERT_EQ(layers::RunRmsNormForward(emulation::Launcher{}, out.out(), rstd_gpu.data(), inp.in(),
                                        weight.data(), kRows, kWidth, 1e-5),
              cudaSuccess);
    ExpectClose(out, "RmsNormForward out, " + tag);
    for (int64_t i = 0; i < kRows; ++i) EXPECT_FLOAT_EQ(rstd_gpu[i], rstd_cpu[i]) << tag;

    Act dout(y16, {kRows, kWidth}, 4), dinp(dx16, {kRows, kWidth}, 5);
    std::vector<float> dweight_cpu = Values(kWidth, 6, -1.0f, 1.0f), dweight_gpu = dweight_cpu;
    std::vector<float> partials(kRmsNormChunks * kWidth);
    ASSERT_TRUE(Cpu()
                    .RmsNormBackward(dout.cpu(), inp.cpu(), F32(weight, {kWidth}),
                                     F32(rstd_cpu, {kRows}), dinp.cpu(), F32(dweight_cpu, {kWidth}))
                    .ok());
    ASSERT_EQ(layers::RunRmsNormBackward(emulation::Launcher{}, dinp.out(), dweight_gpu.data(),
                                         dout.in(), inp.in(), weight.data(), rstd_cpu.data(), kRows,
                                         kWidth, partials.data()),
              cudaSuccess);
    ExpectClose(dinp, "RmsNormBackward dinp, " + tag);
    for (int64_t j = 0; j < kWidth; ++j) {
      EXPECT_NEAR(dweight_gpu[j], dweight_cpu[j], 1e-5f * (1 + std::fabs(dweight_cpu[j]))) << tag;
    }
  });
}

TEST(LayerKernelsOnTheCpu, RopeWithBf16Activations) {
  const int64_t b = 2, t = 3, heads = 2, hd = 8;
  std::vector<float> cos = Values(t * hd / 2, 7, -1.0f, 1.0f), sin = Values(t * hd / 2, 8, -1, 1);
  for (bool bf16 : {false, true}) {
    for (float direction : {1.0f, -1.0f}) {
      Act x(bf16, {b, t, heads, hd}, 9);
      const TensorView c = F32(cos, {t, hd / 2}), s = F32(sin, {t, hd / 2});
      ASSERT_TRUE(
          (direction > 0 ? Cpu().RopeForward(c, s, x.cpu()) : Cpu().RopeBackward(c, s, x.cpu()))
              .ok());
      ASSERT_EQ(layers::RunRope(emulation::Launcher{}, x.out(), cos.data(), sin.data(), b, t, heads,
                                hd, direction),
                cudaSuccess);
      ExpectClose(x, direction > 0 ? "RopeForward" : "RopeBackward");
    }
  }
}

TEST(LayerKernelsOnTheCpu, SwiGluWithBf16Activations) {
  ForEachDtypes(3, [](bool x16, bool y16, bool dx16, const std::string& tag) {
    Act a(x16, {kRows, kWidth}, 10), b(x16, {kRows, kWidth}, 11), out(y16, {kRows, kWidth}, 12);
    ASSERT_TRUE(Cpu().SwiGluForward(a.cpu(), b.cpu(), out.cpu()).ok());
    ASSERT_EQ(
        layers::RunSwiGluForward(emulation::Launcher{}, out.out(), a.in(), b.in(), kRows * kWidth),
        cudaSuccess);
    ExpectClose(out, "SwiGluForward out, " + tag);
    Act dout(y16, {kRows, kWidth}, 13), da(dx16, {kRows, kWidth}, 14),
        db(dx16, {kRows, kWidth}, 15);
    ASSERT_TRUE(Cpu().SwiGluBackward(dout.cpu(), a.cpu(), b.cpu(), da.cpu(), db.cpu()).ok());
    ASSERT_EQ(layers::RunSwiGluBackward(emulation::Launcher{}, da.out(), db.out(), dout.in(),
                                        a.in(), b.in(), kRows * kWidth),
              cudaSuccess);
    ExpectClose(da, "SwiGluBackward da, " + tag);
    ExpectClose(db, "SwiGluBackward db, " + tag);
  });
}

TEST(LayerKernelsOnTheCpu, EmbeddingWithBf16Activations) {
  // Rows [3, 9) of the vocabulary; token 12 is another shard's.
  std::vector<int32_t> tokens = {3, 8, 4, 3, 12, 5};
  const int64_t n = 6, rows = 6, first_row = 3;
  const TensorView token_view{tokens.data(), DType::kI32, Device{}, {n}, {}};
  std::vector<float> table = Values(rows * kWidth, 16, -1.0f, 1.0f);
  for (bool bf16 : {false, true}) {
    Act out(bf16, {n, kWidth}, 17);
    ASSERT_TRUE(
        Cpu().EmbeddingForward(token_view, F32(table, {rows, kWidth}), first_row, out.cpu()).ok());
    ASSERT_EQ(layers::RunEmbeddingForward(emulation::Launcher{}, out.out(), tokens.data(),
                                          table.data(), n, kWidth, first_row, rows),
              cudaSuccess);
    ExpectClose(out, "EmbeddingForward");
    // The backward adds in token order on both: the same bits.
    Act dout(bf16, {n, kWidth}, 18);
    std::vector<float> dtable_cpu = Values(rows * kWidth, 19, -1.0f, 1.0f);
    std::vector<float> dtable_gpu = dtable_cpu;
    ASSERT_TRUE(
        Cpu()
            .EmbeddingBackward(token_view, dout.cpu(), first_row, F32(dtable_cpu, {rows, kWidth}))
            .ok());
    ASSERT_EQ(embedding::RunBackward(emulation::Launcher{}, dtable_gpu.data(), dout.in(),
                                     tokens.data(), n, kWidth, first_row, rows, 3),
              cudaSuccess);
    EXPECT_EQ(dtable_gpu, dtable_cpu) << (bf16 ? "bf16" : "f32") << " dout";
  }
}

}  // namespace
}  // namespace titan::cuda
