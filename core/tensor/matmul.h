// Matrix multiply in PyTorch's Linear layout (weight is [out_features, in_features], no bias),
// through BLAS. Backward accumulates into its gradients, so shared weights just add up.
#ifndef TITAN_CORE_TENSOR_MATMUL_H_
#define TITAN_CORE_TENSOR_MATMUL_H_

#include <cstdint>

namespace titan {

// out[n, oc] = inp[n, c] . weight[oc, c]  (+ out[n, oc] when accumulate).
template <typename T>
void MatmulForward(T* out, const T* inp, const T* weight, int64_t n, int64_t c, int64_t oc,
                   bool accumulate = false);

// dinp += dout . weight; dweight += dout^T . inp. Either gradient may be null to skip it.
template <typename T>
void MatmulBackward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, int64_t n,
                    int64_t c, int64_t oc);

// bf16 operands, f32 result: products are exact in f32 and the sum accumulates in f32.
void MatmulForwardBf16(float* out, const uint16_t* inp, const uint16_t* weight, int64_t n,
                       int64_t c, int64_t oc);

// Whether BLAS runs on OpenMP's thread pool (OpenBLAS's OpenMP build, which titan links) rather
// than threads of its own that would compete with titan's OpenMP kernels for the cores.
bool BlasSharesOpenMpThreads();

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_MATMUL_H_
