#include "core/tensor/cpu_compute.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "core/tensor/bf16_gemm.h"
#include "titan/float16.h"

namespace titan {
namespace {

TensorView View(float* data, std::vector<int64_t> shape) {
  return TensorView{data, DType::kF32, Device{}, std::move(shape), {}};
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

// c = alpha op(a) op(b) + beta c in double, from row-major a and b as stored.
std::vector<double> Reference(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                              const std::vector<float>& a, const std::vector<float>& b, float beta,
                              const std::vector<float>& c) {
  std::vector<double> out(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = ta ? a[p * m + i] : a[i * k + p];
        const double y = tb ? b[j * k + p] : b[p * n + j];
        sum += x * y;
      }
      out[i * n + j] = alpha * sum + beta * c[i * n + j];
    }
  }
  return out;
}

TEST(CpuCompute, GemmEveryTransposeMatchesTheDefinition) {
  const int64_t m = 7, n = 5, k = 9;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<float> a = Random(m * k, 1), b = Random(k * n, 2), c = Random(m * n, 3);
      const std::vector<double> expected = Reference(ta, tb, m, n, k, 0.5f, a, b, 2.0f, c);
      ASSERT_TRUE(
          CpuCompute::Get()
              .Gemm(View(a.data(), ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}),
                    ta,
                    View(b.data(), tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}),
                    tb, 0.5f, 2.0f, View(c.data(), {m, n}))
              .ok());
      for (int64_t i = 0; i < m * n; ++i) EXPECT_NEAR(c[i], expected[i], 1e-4) << ta << tb << i;
    }
  }
}

// bf16 operands multiply exactly in f32, so both paths (oneDNN where the CPU has bf16
// instructions, the emulation elsewhere) agree with the f64 product of the rounded inputs up to
// f32 summation error.
TEST(CpuCompute, Bf16GemmIsTheProductOfTheRoundedInputs) {
  RecordProperty("bf16_gemm", Bf16GemmPath());
  std::cout << "bf16 GEMM " << Bf16GemmPath() << "\n";
  const int64_t m = 33, n = 17, k = 64;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<float> a = Random(m * k, 4), b = Random(k * n, 5), c = Random(m * n, 6);
      std::vector<uint16_t> a16(a.size()), b16(b.size());
      for (size_t i = 0; i < a.size(); ++i) a[i] = Bf16ToF32(a16[i] = F32ToBf16(a[i]));
      for (size_t i = 0; i < b.size(); ++i) b[i] = Bf16ToF32(b16[i] = F32ToBf16(b[i]));
      const std::vector<double> expected = Reference(ta, tb, m, n, k, 1.0f, a, b, 1.0f, c);
      TensorView va{a16.data(),
                    DType::kBF16,
                    Device{},
                    ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k},
                    {}};
      TensorView vb{b16.data(),
                    DType::kBF16,
                    Device{},
                    tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n},
                    {}};
      ASSERT_TRUE(CpuCompute::Get().Gemm(va, ta, vb, tb, 1.0f, 1.0f, View(c.data(), {m, n})).ok())
          << Bf16GemmPath();
      for (int64_t i = 0; i < m * n; ++i) EXPECT_NEAR(c[i], expected[i], 1e-4) << ta << tb << i;
    }
  }
}

TEST(CpuCompute, AnOperandOnAnotherDeviceIsNamed) {
  std::vector<float> x(4), y(4);
  TensorView on_gpu = View(x.data(), {4});
  on_gpu.device = Device{DeviceType::kCuda, 1};
  const absl::Status status = CpuCompute::Get().Accumulate(on_gpu, View(y.data(), {4}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), testing::HasSubstr("Accumulate: operand 'x' is on cuda:1"));
  EXPECT_THAT(status.message(), testing::HasSubstr("cpu:0"));
}

TEST(CpuCompute, AWrongDtypeOrSizeIsNamed) {
  std::vector<float> x(6), y(4);
  TensorView half{x.data(), DType::kBF16, Device{}, {6}, {}};
  EXPECT_THAT(CpuCompute::Get().Scale(half, 2.0f).message(),
              testing::HasSubstr("Scale: operand 'x' expected f32, found bf16"));
  EXPECT_THAT(CpuCompute::Get().Copy(View(x.data(), {6}), View(y.data(), {4})).message(),
              testing::HasSubstr("Copy: operand 'dst' expected 6 elements, found 4"));
  EXPECT_THAT(CpuCompute::Get()
                  .Gemm(View(x.data(), {2, 3}), false, View(x.data(), {2, 3}), false, 1, 0,
                        View(y.data(), {2, 2}))
                  .message(),
              testing::HasSubstr("shapes do not chain"));
}

TEST(CpuCompute, SumOfSquaresWeighsTensorsAndCarriesNonFinite) {
  std::vector<float> a = {1, 2}, b = {3}, out(2);
  const TensorView tensors[] = {View(a.data(), {2}), View(b.data(), {1})};
  const double weights[] = {1.0, 0.5};
  ASSERT_TRUE(CpuCompute::Get().SumOfSquares(tensors, weights, View(out.data(), {2})).ok());
  EXPECT_DOUBLE_EQ(static_cast<double>(out[0]) + out[1], 5.0 + 4.5);
  b[0] = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(CpuCompute::Get().SumOfSquares(tensors, weights, View(out.data(), {2})).ok());
  EXPECT_TRUE(std::isinf(out[0]));
  b[0] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(CpuCompute::Get().SumOfSquares(tensors, weights, View(out.data(), {2})).ok());
  EXPECT_TRUE(std::isnan(out[0]));
}

TEST(CpuCompute, CastRoundsToNearestEven) {
  std::vector<float> x = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256}, back(2);
  std::vector<uint16_t> half(2);
  TensorView h{half.data(), DType::kBF16, Device{}, {2}, {}};
  ASSERT_TRUE(CpuCompute::Get().Cast(View(x.data(), {2}), h).ok());
  ASSERT_TRUE(CpuCompute::Get().Cast(h, View(back.data(), {2})).ok());
  EXPECT_EQ(back[0], 1.0f);               // a tie rounds to the even 1.0
  EXPECT_EQ(back[1], 1.0f + 4.0f / 256);  // a tie rounds up to the even neighbour
}

}  // namespace
}  // namespace titan
