#include "core/tensor/swiglu.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/tensor/internal/grad_check.h"

namespace titan {
namespace {

TEST(SwiGluTest, ForwardAndBackward) {
  const int64_t n = 50;
  auto a = internal::RandomVector(n, 1, 3.0), b = internal::RandomVector(n, 2);
  auto dout = internal::RandomVector(n, 3);
  std::vector<double> out(n);
  SwiGluForward(out.data(), a.data(), b.data(), n);
  EXPECT_NEAR(out[7], a[7] / (1 + std::exp(-a[7])) * b[7], 1e-15);
  auto loss = [&] {
    SwiGluForward(out.data(), a.data(), b.data(), n);
    return internal::Dot(out, dout);
  };
  std::vector<double> da(n), db(n);
  SwiGluBackward(da.data(), db.data(), dout.data(), a.data(), b.data(), n);
  EXPECT_LT(internal::MaxGradientError(loss, a, da), 1e-8);
  EXPECT_LT(internal::MaxGradientError(loss, b, db), 1e-8);
}

}  // namespace
}  // namespace titan
