#include "core/tensor/swiglu.h"

namespace titan {

template <typename T>
void SwiGluForward(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = SwiGluElement(a[i], b[i]);
}

template <typename T>
void SwiGluBackward(T* da, T* db, const T* dout, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) SwiGluBackwardElement(da[i], db[i], dout[i], a[i], b[i]);
}

template void SwiGluForward(float*, const float*, const float*, int64_t);
template void SwiGluForward(double*, const double*, const double*, int64_t);
template void SwiGluBackward(float*, float*, const float*, const float*, const float*, int64_t);
template void SwiGluBackward(double*, double*, const double*, const double*, const double*,
                             int64_t);

}  // namespace titan
