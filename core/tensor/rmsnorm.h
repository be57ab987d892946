// RMSNorm: out = inp / sqrt(mean(inp^2) + eps) * weight, row by row.
#ifndef TITAN_CORE_TENSOR_RMSNORM_H_
#define TITAN_CORE_TENSOR_RMSNORM_H_

#include <cmath>
#include <cstdint>

namespace titan {

inline constexpr double kRmsNormEps = 1e-5;

// rows: n, channels: c. Saves rstd[n] = 1 / sqrt(mean(inp^2) + eps) for the backward.
template <typename T>
void RmsNormForward(T* out, T* rstd, const T* inp, const T* weight, int64_t n, int64_t c,
                    double eps = kRmsNormEps);

// dinp += d/dinp, dweight += d/dweight.
template <typename T>
void RmsNormBackward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight,
                     const T* rstd, int64_t n, int64_t c);

// The pieces of both, one row or one range of columns: the reference loops and the vector
// kernels' fallback (core/tensor/vector_kernels.h) run these.

// y = x * rstd * weight for one row of c; returns rstd, from a sum of squares in double.
template <typename T>
inline T RmsNormForwardRow(T* y, const T* x, const T* weight, int64_t c, double eps) {
  double sum_squares = 0;
#pragma omp simd reduction(+ : sum_squares)
  for (int64_t j = 0; j < c; ++j) sum_squares += static_cast<double>(x[j]) * x[j];
  const T r = static_cast<T>(1.0 / std::sqrt(sum_squares / c + eps));
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) y[j] = x[j] * r * weight[j];
  return r;
}

// With g = weight * dy: dx += rstd * (g - x * rstd^2 * mean(g * x)), mean(g * x) in double.
template <typename T>
inline void RmsNormBackwardRow(T* dx, const T* dy, const T* x, const T* weight, T r, int64_t c) {
  double dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < c; ++j) dot += static_cast<double>(weight[j]) * dy[j] * x[j];
  const T coefficient = static_cast<T>(dot / c) * r * r;
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) dx[j] += r * (weight[j] * dy[j] - x[j] * coefficient);
}

// dweight[j] += dout[i, j] * inp[i, j] * rstd[i] for the columns [begin, end), rows in order.
template <typename T>
inline void RmsNormWeightGradColumns(T* dweight, const T* dout, const T* inp, const T* rstd,
                                     int64_t n, int64_t c, int64_t begin, int64_t end) {
  for (int64_t i = 0; i < n; ++i) {
    const T* x = inp + i * c;
    const T* dy = dout + i * c;
    for (int64_t j = begin; j < end; ++j) dweight[j] += dy[j] * x[j] * rstd[i];
  }
}

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_RMSNORM_H_
