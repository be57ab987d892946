// What the vector kernels' tests share: the sizes they try, bit comparisons, and the fixture that
// forces Highway's dispatch to one instruction set per test (vector_kernels_test.cc instantiates
// it for each target this CPU runs, for the tests of every file in titan_tensor_test).
#ifndef TITAN_CORE_TENSOR_VECTOR_KERNELS_TEST_SUPPORT_H_
#define TITAN_CORE_TENSOR_VECTOR_KERNELS_TEST_SUPPORT_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/tensor/vector_kernels.h"
#include "hwy/targets.h"

namespace titan {

// Sizes around the vector widths (4, 8, 16 f32 lanes) and past one 16384-element block.
inline const int64_t kSizes[] = {0,  1,  3,  4,  7,    8,         15,
                                 16, 17, 31, 33, 1000, 16384 + 5, 3 * 16384 + 7};

inline uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

inline float FromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// Same bits, or both NaN: x86 picks which NaN operand's payload survives by operand order, which
// the compiler may swap in commutative operations, so only NaN-ness is the contract there.
inline bool SameValue(float a, float b) {
  return Bits(a) == Bits(b) || (std::isnan(a) && std::isnan(b));
}

class VectorKernelsTest : public ::testing::TestWithParam<int64_t> {
 protected:
  // Without AVX2 the kernels that take an exp run the scalar references (vector_kernels.cc).
  bool ExpByReference() const {
    const int64_t t = GetParam();
    return t == HWY_SCALAR || t == HWY_EMU128 || t == HWY_SSSE3 || t == HWY_SSE4;
  }
  int ExpUlps() const { return ExpByReference() ? kReferenceExpUlps : kVectorExpUlps; }

  void SetUp() override {
    hwy::SetSupportedTargetsForTest(GetParam());
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  }
  void TearDown() override {
    hwy::SetSupportedTargetsForTest(0);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  }
};

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_VECTOR_KERNELS_TEST_SUPPORT_H_
