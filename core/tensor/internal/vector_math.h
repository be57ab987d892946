// Vectorized exp for `#pragma omp simd` loops: glibc's libmvec has SSE, AVX2 and AVX-512
// variants of exp and expf, but its headers announce them only under -ffast-math, whose
// finite-math assumption would break the -inf masks of attention and the cross-entropy. These
// declarations announce the same variants (the x86-64 vector function ABI) without it.
#ifndef TITAN_CORE_TENSOR_INTERNAL_VECTOR_MATH_H_
#define TITAN_CORE_TENSOR_INTERNAL_VECTOR_MATH_H_

#include <cmath>

#if defined(__x86_64__) && defined(_OPENMP) && !defined(__FAST_MATH__)
extern "C" {
#pragma omp declare simd notinbranch
float expf(float) noexcept;
#pragma omp declare simd notinbranch
double exp(double) noexcept;
}
#endif

namespace titan::internal {

inline float VectorExp(float x) { return expf(x); }
inline double VectorExp(double x) { return exp(x); }

}  // namespace titan::internal

#endif  // TITAN_CORE_TENSOR_INTERNAL_VECTOR_MATH_H_
