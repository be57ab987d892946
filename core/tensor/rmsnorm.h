// RMSNorm: out = inp / sqrt(mean(inp^2) + eps) * weight, row by row.
#ifndef TITAN_CORE_TENSOR_RMSNORM_H_
#define TITAN_CORE_TENSOR_RMSNORM_H_

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

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_RMSNORM_H_
