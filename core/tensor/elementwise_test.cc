#include "core/tensor/elementwise.h"

#include <gtest/gtest.h>

#include "core/tensor/internal/grad_check.h"

namespace titan {
namespace {

TEST(ElementwiseTest, AddMulScaleForwardAndBackward) {
  const int64_t n = 20;
  auto a = internal::RandomVector(n, 1), b = internal::RandomVector(n, 2);
  auto dout = internal::RandomVector(n, 3);
  std::vector<double> out(n);
  auto add_loss = [&] {
    AddForward(out.data(), a.data(), b.data(), n);
    return internal::Dot(out, dout);
  };
  auto mul_loss = [&] {
    MulForward(out.data(), a.data(), b.data(), n);
    return internal::Dot(out, dout);
  };
  std::vector<double> da(n), db(n);
  AddBackward(da.data(), db.data(), dout.data(), n);
  EXPECT_LT(internal::MaxGradientError(add_loss, a, da), 1e-8);
  EXPECT_LT(internal::MaxGradientError(add_loss, b, db), 1e-8);
  da.assign(n, 0);
  db.assign(n, 0);
  MulBackward(da.data(), db.data(), dout.data(), a.data(), b.data(), n);
  EXPECT_LT(internal::MaxGradientError(mul_loss, a, da), 1e-8);
  EXPECT_LT(internal::MaxGradientError(mul_loss, b, db), 1e-8);
  std::vector<double> x = a;
  Scale(x.data(), 3.0, n);
  EXPECT_EQ(x[4], 3.0 * a[4]);
}

}  // namespace
}  // namespace titan
