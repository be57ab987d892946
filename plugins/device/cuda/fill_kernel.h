#ifndef TITAN_PLUGINS_DEVICE_CUDA_FILL_KERNEL_H_
#define TITAN_PLUGINS_DEVICE_CUDA_FILL_KERNEL_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace titan::cuda {

// Sets `count` floats at `dst` to `value` on `stream`.
cudaError_t LaunchFillF32(float* dst, size_t count, float value, cudaStream_t stream);
// Sets `count` bf16 values at `dst` to `value` rounded to nearest even, on `stream`.
cudaError_t LaunchFillBf16(void* dst, size_t count, float value, cudaStream_t stream);

// dst[i] = titan/truncated_normal.h's At(key, i, std, low, high) for i < count, on `stream`.
cudaError_t LaunchFillTruncatedNormal(float* dst, size_t count, uint64_t key, double std,
                                      double low, double high, cudaStream_t stream);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_FILL_KERNEL_H_
