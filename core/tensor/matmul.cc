#include "core/tensor/matmul.h"

#include <cblas.h>

#include <vector>

#include "core/tensor/dtype.h"
#include "core/tensor/internal/gemm.h"

namespace titan {
using internal::Gemm;

bool BlasSharesOpenMpThreads() { return openblas_get_parallel() == 2; }  // 2: OpenMP build

template <typename T>
void MatmulForward(T* out, const T* inp, const T* weight, int64_t n, int64_t c, int64_t oc,
                   bool accumulate) {
  Gemm(CblasNoTrans, CblasTrans, n, oc, c, T{1}, inp, c, weight, c, accumulate ? 1 : 0, out, oc);
}

template <typename T>
void MatmulBackward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, int64_t n,
                    int64_t c, int64_t oc) {
  if (dinp != nullptr)
    Gemm(CblasNoTrans, CblasNoTrans, n, c, oc, T{1}, dout, oc, weight, c, 1, dinp, c);
  if (dweight != nullptr) {
    Gemm(CblasTrans, CblasNoTrans, oc, c, n, T{1}, dout, oc, inp, c, 1, dweight, c);
  }
}

void MatmulForwardBf16(float* out, const uint16_t* inp, const uint16_t* weight, int64_t n,
                       int64_t c, int64_t oc) {
  // Widening is exact, so sgemm on the widened copies is the f32-accumulating bf16 product.
  std::vector<float> inp32(n * c), weight32(oc * c);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n * c; ++i) inp32[i] = Bf16ToF32(inp[i]);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < oc * c; ++i) weight32[i] = Bf16ToF32(weight[i]);
  MatmulForward(out, inp32.data(), weight32.data(), n, c, oc);
}

template void MatmulForward(float*, const float*, const float*, int64_t, int64_t, int64_t, bool);
template void MatmulForward(double*, const double*, const double*, int64_t, int64_t, int64_t, bool);
template void MatmulBackward(float*, float*, const float*, const float*, const float*, int64_t,
                             int64_t, int64_t);
template void MatmulBackward(double*, double*, const double*, const double*, const double*, int64_t,
                             int64_t, int64_t);

}  // namespace titan
