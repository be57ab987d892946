#ifndef TITAN_PLUGINS_DEVICE_CUDA_FILL_KERNEL_H_
#define TITAN_PLUGINS_DEVICE_CUDA_FILL_KERNEL_H_

#include <cuda_runtime.h>

#include <cstddef>

namespace titan::cuda {

// Sets `count` floats at `dst` to `value` on `stream`.
cudaError_t LaunchFillF32(float* dst, size_t count, float value, cudaStream_t stream);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_FILL_KERNEL_H_
