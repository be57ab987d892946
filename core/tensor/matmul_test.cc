#include "core/tensor/matmul.h"

#include <gtest/gtest.h>

#include "core/tensor/dtype.h"
#include "core/tensor/internal/grad_check.h"

namespace titan {
namespace {

using internal::RandomVector;

TEST(MatmulTest, BlasRunsOnTheOpenMpThreadPool) {
  EXPECT_TRUE(BlasSharesOpenMpThreads())
      << "linked against an OpenBLAS with its own threads; install libopenblas-openmp-dev "
         "(tools/setup-deps) and reconfigure";
}

TEST(MatmulTest, ForwardMatchesNaiveProduct) {
  const int64_t n = 5, c = 7, oc = 3;
  auto inp = RandomVector(n * c, 1), weight = RandomVector(oc * c, 2);
  std::vector<double> out(n * oc);
  MatmulForward(out.data(), inp.data(), weight.data(), n, c, oc);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < oc; ++o) {
      double expected = 0;
      for (int64_t j = 0; j < c; ++j) expected += inp[i * c + j] * weight[o * c + j];
      EXPECT_NEAR(out[i * oc + o], expected, 1e-12);
    }
  }
  MatmulForward(out.data(), inp.data(), weight.data(), n, c, oc, /*accumulate=*/true);
  double expected = 0;
  for (int64_t j = 0; j < c; ++j) expected += inp[j] * weight[j];
  EXPECT_NEAR(out[0], 2 * expected, 1e-12);
}

TEST(MatmulTest, BackwardMatchesFiniteDifferences) {
  const int64_t n = 4, c = 6, oc = 5;
  auto inp = RandomVector(n * c, 3), weight = RandomVector(oc * c, 4),
       dout = RandomVector(n * oc, 5);
  auto loss = [&] {
    std::vector<double> out(n * oc);
    MatmulForward(out.data(), inp.data(), weight.data(), n, c, oc);
    return internal::Dot(out, dout);
  };
  std::vector<double> dinp(n * c), dweight(oc * c);
  MatmulBackward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(), n, c, oc);
  EXPECT_LT(internal::MaxGradientError(loss, inp, dinp), 1e-7);
  EXPECT_LT(internal::MaxGradientError(loss, weight, dweight), 1e-7);
}

TEST(MatmulTest, Bf16AccumulatesInF32) {
  const int64_t n = 3, c = 300, oc = 2;
  std::vector<uint16_t> inp(n * c), weight(oc * c);
  std::vector<float> inp32(n * c), weight32(oc * c);
  auto a = RandomVector(n * c, 6), b = RandomVector(oc * c, 7);
  for (int64_t i = 0; i < n * c; ++i) inp32[i] = Bf16ToF32(inp[i] = F32ToBf16(a[i]));
  for (int64_t i = 0; i < oc * c; ++i) weight32[i] = Bf16ToF32(weight[i] = F32ToBf16(b[i]));
  std::vector<float> out(n * oc), expected(n * oc);
  MatmulForwardBf16(out.data(), inp.data(), weight.data(), n, c, oc);
  MatmulForward(expected.data(), inp32.data(), weight32.data(), n, c, oc);
  EXPECT_EQ(out, expected);
}

}  // namespace
}  // namespace titan
