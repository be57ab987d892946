#include "core/tensor/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "core/tensor/internal/columns.h"

namespace titan {

template <typename T>
void RmsNormForward(T* out, T* rstd, const T* inp, const T* weight, int64_t n, int64_t c,
                    double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T* x = inp + i * c;
    double sum_squares = 0;
#pragma omp simd reduction(+ : sum_squares)
    for (int64_t j = 0; j < c; ++j) sum_squares += static_cast<double>(x[j]) * x[j];
    const T r = static_cast<T>(1.0 / std::sqrt(sum_squares / c + eps));
    T* y = out + i * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) y[j] = x[j] * r * weight[j];
    rstd[i] = r;
  }
}

// With g = weight * dout: dinp = rstd * (g - inp * rstd^2 * mean(g * inp)).
template <typename T>
void RmsNormBackward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight,
                     const T* rstd, int64_t n, int64_t c) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T* x = inp + i * c;
    const T* dy = dout + i * c;
    double dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < c; ++j) dot += static_cast<double>(weight[j]) * dy[j] * x[j];
    const T r = rstd[i];
    const T coefficient = static_cast<T>(dot / c) * r * r;
    T* dx = dinp + i * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) dx[j] += r * (weight[j] * dy[j] - x[j] * coefficient);
  }
  internal::ForEachColumnChunk(c, [&](int64_t begin, int64_t end) {
    for (int64_t i = 0; i < n; ++i) {
      const T* x = inp + i * c;
      const T* dy = dout + i * c;
      for (int64_t j = begin; j < end; ++j) dweight[j] += dy[j] * x[j] * rstd[i];
    }
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
