#include "core/tensor/rmsnorm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/tensor/internal/grad_check.h"

namespace titan {
namespace {

TEST(RmsNormTest, ForwardNormalizesEachRow) {
  const int64_t n = 2, c = 4;
  std::vector<double> inp = {1, 2, 3, 4, -1, 0, 0, 1}, weight = {1, 2, 1, 0.5};
  std::vector<double> out(n * c), rstd(n);
  RmsNormForward(out.data(), rstd.data(), inp.data(), weight.data(), n, c);
  EXPECT_NEAR(rstd[0], 1 / std::sqrt(30.0 / 4 + 1e-5), 1e-15);
  EXPECT_NEAR(out[1], 2 * rstd[0] * 2, 1e-15);
  EXPECT_NEAR(out[7], 1 / std::sqrt(0.5 + 1e-5) * 0.5, 1e-15);
}

TEST(RmsNormTest, BackwardMatchesFiniteDifferences) {
  const int64_t n = 3, c = 67;
  auto inp = internal::RandomVector(n * c, 1), weight = internal::RandomVector(c, 2);
  auto dout = internal::RandomVector(n * c, 3);
  std::vector<double> out(n * c), rstd(n);
  auto loss = [&] {
    RmsNormForward(out.data(), rstd.data(), inp.data(), weight.data(), n, c);
    return internal::Dot(out, dout);
  };
  loss();
  std::vector<double> dinp(n * c), dweight(c);
  RmsNormBackward(dinp.data(), dweight.data(), dout.data(), inp.data(), weight.data(), rstd.data(),
                  n, c);
  EXPECT_LT(internal::MaxGradientError(loss, inp, dinp), 1e-7);
  EXPECT_LT(internal::MaxGradientError(loss, weight, dweight), 1e-7);
}

}  // namespace
}  // namespace titan
