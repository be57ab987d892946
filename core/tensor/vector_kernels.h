// Titan's own elementwise kernels in vector form through Google Highway: compiled for each x86
// instruction set Highway knows (SSSE3, SSE4, AVX2, AVX3 = AVX-512 F/BW/DQ/VL) and the best one the
// CPU has chosen at run time. Each gives the same bits as its scalar reference (titan/float16.h's
// casts, adam.h's AdamElement); vector_kernels_test.cc checks that on every instruction set this
// CPU runs. Each call splits the work across the OpenMP threads.
#ifndef TITAN_CORE_TENSOR_VECTOR_KERNELS_H_
#define TITAN_CORE_TENSOR_VECTOR_KERNELS_H_

#include <cstdint>

#include "core/tensor/adam.h"

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

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_VECTOR_KERNELS_H_
