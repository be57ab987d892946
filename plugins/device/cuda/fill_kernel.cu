#include "fill_kernel.h"
#include "float_convert.cuh"
#include "titan/truncated_normal.h"

namespace titan::cuda {
namespace {

__global__ void FillF32Kernel(float* dst, size_t count, float value) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = value;
  }
}

__global__ void FillBf16Kernel(uint16_t* dst, size_t count, float value) {
  const uint16_t bits = F32ToBf16(value);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = bits;
  }
}

__global__ void FillTruncatedNormalKernel(float* dst, size_t count, uint64_t key, double std,
                                          double low, double high) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = truncated_normal::At(key, static_cast<int64_t>(i), std, low, high);
  }
}

unsigned Blocks(size_t count, int threads) {
  const size_t blocks = (count + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

}  // namespace

cudaError_t LaunchFillTruncatedNormal(float* dst, size_t count, uint64_t key, double std,
                                      double low, double high, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  FillTruncatedNormalKernel<<<Blocks(count, kThreads), kThreads, 0, stream>>>(dst, count, key, std,
                                                                              low, high);
  return cudaGetLastError();
}

cudaError_t LaunchFillF32(float* dst, size_t count, float value, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  FillF32Kernel<<<Blocks(count, kThreads), kThreads, 0, stream>>>(dst, count, value);
  return cudaGetLastError();
}

cudaError_t LaunchFillBf16(void* dst, size_t count, float value, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  FillBf16Kernel<<<Blocks(count, kThreads), kThreads, 0, stream>>>(static_cast<uint16_t*>(dst),
                                                                   count, value);
  return cudaGetLastError();
}

}  // namespace titan::cuda
