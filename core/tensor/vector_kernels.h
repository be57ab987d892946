// Titan's own CPU kernels in vector form through Google Highway: compiled for each x86 instruction
// set Highway knows (SSSE3, SSE4, AVX2, AVX3 = AVX-512 F/BW/DQ/VL) and the best one the CPU has
// chosen at run time. Each is tested against its scalar reference (titan/float16.h's casts,
// adam.h, sgd.h, rmsnorm.h, swiglu.h, cross_entropy.h) by vector_kernels_test.cc on every
// instruction set this CPU runs: the casts, AdamW and RMSNorm's elementwise parts give the same
// bits; where an exp or a sum's order differs, the bound is stated below. Each call splits the work
// across the OpenMP threads, and each element's result is the same whichever thread or shard
// computes it.
#ifndef TITAN_CORE_TENSOR_VECTOR_KERNELS_H_
#define TITAN_CORE_TENSOR_VECTOR_KERNELS_H_

#include <cstdint>

#include "core/tensor/adam.h"
#include "core/tensor/sgd.h"

namespace titan {

// Highway's name of the instruction set the kernels run with on this CPU ("AVX3", "AVX2", ...).
const char* VectorKernelsTarget();

// out[i] = F32ToBf16(in[i]): round to nearest even, NaN kept NaN (quieted).
void VectorCastF32ToBf16(const float* in, uint16_t* out, int64_t n);
// out[i] = Bf16ToF32(in[i]), exact.
void VectorCastBf16ToF32(const uint16_t* in, float* out, int64_t n);
// AdamElement on each of n elements.
void VectorAdamUpdate(const AdamConstants& c, float* param, const float* grad, float* m, float* v,
                      int64_t n);
// SgdElement on each of n elements; buffer (the momentum) may be null without momentum.
void VectorSgdUpdate(const SgdConstants& c, float* param, const float* grad, float* buffer,
                     int64_t n);

// out[i] = exp(in[i]): Highway's Exp (hwy/contrib/math) with expf's NaN, overflow and underflow.
// Against exp in double rounded to f32, on every f32 of [-104, 89]: at most kVectorExpUlps apart;
// the exp of the scalar references' `omp simd` loops, glibc's vector expf (libmvec, its SSE4
// variant on x86-64), at most kReferenceExpUlps. So an exp of the vector kernels is at most
// kExpUlpsApart from the reference's. Every kernel below that takes an exp takes this one. On CPUs
// without AVX2, where Highway's Exp is slower than glibc's, the kernels that take an exp are the
// references themselves.
inline constexpr int kVectorExpUlps = 1;
inline constexpr int kReferenceExpUlps = 3;
inline constexpr int kExpUlpsApart = kVectorExpUlps + kReferenceExpUlps;
void VectorExp(const float* in, float* out, int64_t n);

// SwiGluForward and SwiGluBackward (swiglu.h) with VectorExp: within kExpUlpsApart + 2 ulps of the
// reference's results (one exp, then a division and a product that can each add one); da's slope
// 1 + a * (1 - sigmoid(a)) cancels near a = -1.28, so there the ulps are those of its terms' size.
void VectorSwiGluForward(float* out, const float* a, const float* b, int64_t n);
void VectorSwiGluBackward(float* da, float* db, const float* dout, const float* a, const float* b,
                          int64_t n);

// RmsNormForward and RmsNormBackward (rmsnorm.h). The row's sum of squares (and the backward's
// dot product) is in double as the reference's, summed in another order: rstd and the backward's
// coefficient are the reference's or 1 ulp from it (a double's last bits deciding an f32
// rounding); given those, every output is the reference's, bit for bit, and dweight always is.
void VectorRmsNormForward(float* out, float* rstd, const float* inp, const float* weight, int64_t n,
                          int64_t c, double eps);
void VectorRmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                           const float* weight, const float* rstd, int64_t n, int64_t c);

// CrossEntropySumExp and CrossEntropyBackward (cross_entropy.h) with VectorExp. The sum of exps is
// in double as the reference's, in another order: within kExpUlpsApart + 1 ulps of the reference's
// f32 sum. The gradient is within kExpUlpsApart + 1 ulps of the reference's, and the target's
// column, where softmax - 1 cancels, within that many ulps of the row's scale.
// CrossEntropyRowMax (cross_entropy.h): each row's maximum, the reference's value (NaN where
// row[0] is NaN, else the largest of the others that are not NaN); a maximum of zero may carry
// the other sign of zero, as the reference's own vector loop may.
void VectorCrossEntropyRowMax(float* max, const float* logits, int64_t n, int64_t v);
void VectorCrossEntropySumExp(float* sum, const float* logits, const float* max, int64_t n,
                              int64_t v);
void VectorCrossEntropyBackward(float* dlogits, const float* logits, const float* lse,
                                const int32_t* targets, int64_t n, int64_t v, float dloss,
                                int64_t first_column);

// RopeForward and RopeBackward (rope.h), the same bits: each pair's two products and their sum
// lane by lane, the other pair member's product negated in place of a subtraction.
void VectorRopeForward(float* x, const float* cos, const float* sin, int64_t b, int64_t t,
                       int64_t heads, int64_t head_dim);
void VectorRopeBackward(float* dx, const float* cos, const float* sin, int64_t b, int64_t t,
                        int64_t heads, int64_t head_dim);

// The sum of x[i]^2 in double (each square exact), summed by blocks of 2^14 elements whose sums
// are added in order: the same bits whatever the thread count. Within n * 2^-52 relative of the
// sum in order (both sums of non-negative terms, each within (n - 1) * 2^-53 of the exact one).
double VectorSumOfSquares(const float* x, int64_t n);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_VECTOR_KERNELS_H_
