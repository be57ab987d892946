#include "core/tensor/rmsnorm.h"

#include "core/tensor/internal/columns.h"

namespace titan {

template <typename T>
void RmsNormForward(T* out, T* rstd, const T* inp, const T* weight, int64_t n, int64_t c,
                    double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    rstd[i] = RmsNormForwardRow(out + i * c, inp + i * c, weight, c, eps);
}

template <typename T>
void RmsNormBackward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight,
                     const T* rstd, int64_t n, int64_t c) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    RmsNormBackwardRow(dinp + i * c, dout + i * c, inp + i * c, weight, rstd[i], c);
  }
  internal::ForEachColumnChunk(c, [&](int64_t begin, int64_t end) {
    RmsNormWeightGradColumns(dweight, dout, inp, rstd, n, c, begin, end);
  });
}

template void RmsNormForward(float*, float*, const float*, const float*, int64_t, int64_t, double);
template void RmsNormForward(double*, double*, const double*, const double*, int64_t, int64_t,
                             double);
template void RmsNormBackward(float*, float*, const float*, const float*, const float*,
                              const float*, int64_t, int64_t);
template void RmsNormBackward(double*, double*, const double*, const double*, const double*,
                              const double*, int64_t, int64_t);

}  // namespace titan
