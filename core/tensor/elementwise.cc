#include "core/tensor/elementwise.h"

#include <initializer_list>

namespace titan {

template <typename T>
void AddForward(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void AddBackward(T* da, T* db, const T* dout, int64_t n) {
  for (T* d : {da, db}) {
    if (d == nullptr) continue;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] += dout[i];
  }
}

template <typename T>
void MulForward(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

template <typename T>
void MulBackward(T* da, T* db, const T* dout, const T* a, const T* b, int64_t n) {
  if (da != nullptr) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) da[i] += dout[i] * b[i];
  }
  if (db != nullptr) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) db[i] += dout[i] * a[i];
  }
}

template <typename T>
void Scale(T* x, T scale, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

#define TITAN_INSTANTIATE_ELEMENTWISE(T)                                    \
  template void AddForward(T*, const T*, const T*, int64_t);                \
  template void AddBackward(T*, T*, const T*, int64_t);                     \
  template void MulForward(T*, const T*, const T*, int64_t);                \
  template void MulBackward(T*, T*, const T*, const T*, const T*, int64_t); \
  template void Scale(T*, T, int64_t);
TITAN_INSTANTIATE_ELEMENTWISE(float)
TITAN_INSTANTIATE_ELEMENTWISE(double)
#undef TITAN_INSTANTIATE_ELEMENTWISE

}  // namespace titan
