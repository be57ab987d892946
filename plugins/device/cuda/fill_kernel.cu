#include "fill_kernel.h"

namespace titan::cuda {
namespace {

__global__ void FillF32Kernel(float* dst, size_t count, float value) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = value;
  }
}

}  // namespace

cudaError_t LaunchFillF32(float* dst, size_t count, float value, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const size_t blocks = (count + kThreads - 1) / kThreads;
  FillF32Kernel<<<static_cast<unsigned>(blocks < 65535 ? blocks : 65535), kThreads, 0, stream>>>(
      dst, count, value);
  return cudaGetLastError();
}

}  // namespace titan::cuda
