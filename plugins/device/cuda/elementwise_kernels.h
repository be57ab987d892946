// Reductions, casts and elementwise kernels on raw device pointers (no SDK types: nvcc builds
// these as C++17). Each launch is asynchronous on `stream` and returns the launch's error.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_ELEMENTWISE_KERNELS_H_
#define TITAN_PLUGINS_DEVICE_CUDA_ELEMENTWISE_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "activation.h"

namespace titan::cuda {

// The float formats Cast converts between; the values are the kernels' own.
enum class FloatFormat : int { kF32 = 0, kBF16 = 1, kF16 = 2 };

// x *= scale; out += x. Each operand f32 or bf16 (activation.h): the arithmetic in f32, rounded
// once.
cudaError_t LaunchScale(ActivationOut x, int64_t n, float scale, cudaStream_t stream);
cudaError_t LaunchAccumulate(ActivationIn x, ActivationOut out, int64_t n, cudaStream_t stream);
// dst = src converted, rounding to nearest even as titan/float16.h does on the host.
cudaError_t LaunchCast(const void* src, FloatFormat src_format, void* dst, FloatFormat dst_format,
                       int64_t n, cudaStream_t stream);

// dst [columns, rows] = src [rows, columns] transposed, elements of element_size bytes (1, 2, 4).
cudaError_t LaunchTranspose(const void* src, void* dst, int64_t rows, int64_t columns,
                            int element_size, cudaStream_t stream);

// Sum of squares in f64, in a fixed order: kSquareBlocks partial sums of x, then one block adds
// them in a fixed tree and adds weight * that to *total (so tensors fold in call order).
constexpr int kSquareBlocks = 256;
cudaError_t LaunchSumOfSquares(const float* x, int64_t n, double weight, double* partials,
                               double* total, cudaStream_t stream);
// out[0] = (float)total, out[1] = the remainder total - out[0] (0 when total is not finite).
cudaError_t LaunchSplitDouble(const double* total, float* out, cudaStream_t stream);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_ELEMENTWISE_KERNELS_H_
