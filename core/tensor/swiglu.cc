#include "core/tensor/swiglu.h"

#include "core/tensor/internal/vector_math.h"

namespace titan {

template <typename T>
void SwiGluForward(T* out, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] / (T{1} + internal::VectorExp(-a[i])) * b[i];
}

template <typename T>
void SwiGluBackward(T* da, T* db, const T* dout, const T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T sigmoid = T{1} / (T{1} + internal::VectorExp(-a[i]));
    const T silu = a[i] * sigmoid;
    // silu'(a) = sigmoid(a) * (1 + a * (1 - sigmoid(a)))
    da[i] += dout[i] * b[i] * sigmoid * (T{1} + a[i] * (T{1} - sigmoid));
    db[i] += dout[i] * silu;
  }
}

template void SwiGluForward(float*, const float*, const float*, int64_t);
template void SwiGluForward(double*, const double*, const double*, int64_t);
template void SwiGluBackward(float*, float*, const float*, const float*, const float*, int64_t);
template void SwiGluBackward(double*, double*, const double*, const double*, const double*,
                             int64_t);

}  // namespace titan
