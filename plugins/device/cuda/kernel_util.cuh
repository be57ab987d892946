// Helpers the kernels share: launch shapes and fixed-order block reductions. A reduction here
// always combines the same partial sums in the same tree, whatever the GPU, so results repeat
// bit for bit from run to run.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_KERNEL_UTIL_CUH_
#define TITAN_PLUGINS_DEVICE_CUDA_KERNEL_UTIL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace titan::cuda {

constexpr int kThreads = 256;  // threads per block of every 1-D launch

// Blocks for a grid-stride loop over n elements (capped: the loop covers the rest).
inline unsigned BlocksFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

#define TITAN_GRID_STRIDE(i, n)                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// The sum of `value` over a block of kThreads threads, in a fixed tree; every thread gets it.
template <typename T>
__device__ T BlockSum(T value) {
  __shared__ T shared[kThreads];
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();  // the next call may reuse the shared array
  return total;
}

// The largest `value` over the block; every thread gets it.
__device__ inline float BlockMax(float value) {
  __shared__ float shared[kThreads];
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      shared[threadIdx.x] = fmaxf(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  const float top = shared[0];
  __syncthreads();
  return top;
}

// The block's dynamic shared memory (the launch's third parameter) as floats, 16-byte aligned.
// The CPU emulation of the tests (cuda_emulation.h) gives its own.
#if !defined(TITAN_CUDA_EMULATION)
__device__ inline float* DynamicSharedFloats() {
  extern __shared__ float4 titan_dynamic_shared[];
  return reinterpret_cast<float*>(titan_dynamic_shared);
}
#endif

// The sum over a warp in a fixed butterfly; every lane gets it.
__device__ inline float WarpSum(float value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

}  // namespace titan::cuda

#if defined(__CUDACC__)
// Launches kernel<<<blocks, threads, shared_bytes, stream>>>, allowing it the shared memory it
// asks for past the default 48 KiB: the launcher the kernels' Run* functions take on the GPU
// (the CPU emulation of the tests passes its own).
struct StreamLaunch {
  cudaStream_t stream;
  template <typename... Parameters, typename... Arguments>
  cudaError_t operator()(void (*kernel)(Parameters...), int64_t blocks, int threads,
                         size_t shared_bytes, Arguments... arguments) const {
    if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
    if (blocks == 0) return cudaSuccess;
    if (shared_bytes > 0) {
      const cudaError_t allowed = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes));
      if (allowed != cudaSuccess) return allowed;
    }
    kernel<<<static_cast<unsigned>(blocks), threads, shared_bytes, stream>>>(arguments...);
    return cudaGetLastError();
  }
};
#endif

#endif  // TITAN_PLUGINS_DEVICE_CUDA_KERNEL_UTIL_CUH_
