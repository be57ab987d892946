#include <climits>

#include "attention_kernels.cuh"
#include "attention_kernels.h"

namespace titan::cuda {
namespace {

// Launches on `stream`, allowing the kernel the shared memory it asks for past the default 48 KiB
// (every tiling fits the smallest opt-in limit of the GPUs built for, kAttentionSharedLimit).
struct StreamLaunch {
  cudaStream_t stream;
  template <typename... Parameters, typename... Arguments>
  cudaError_t operator()(void (*kernel)(Parameters...), int64_t blocks, int threads,
                         size_t shared_bytes, Arguments... arguments) const {
    if (blocks > INT_MAX) return cudaErrorInvalidConfiguration;
    if (shared_bytes > 0) {
      const cudaError_t allowed = cudaFuncSetAttribute(
          kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes));
      if (allowed != cudaSuccess) return allowed;
    }
    kernel<<<static_cast<unsigned>(blocks), threads, shared_bytes, stream>>>(arguments...);
    return cudaGetLastError();
  }
};

}  // namespace

cudaError_t LaunchAttentionForward(const AttentionDims& dims, const float* q, const float* k,
                                   const float* v, float* out, float* lse, cudaStream_t stream) {
  return attention::RunForward(StreamLaunch{stream}, dims, q, k, v, out, lse);
}

cudaError_t LaunchAttentionBackward(const AttentionDims& dims, const float* dout, const float* q,
                                    const float* k, const float* v, const float* out,
                                    const float* lse, float* dq, float* dk, float* dv,
                                    float* scratch, cudaStream_t stream) {
  return attention::RunBackward(StreamLaunch{stream}, dims, dout, q, k, v, out, lse, dq, dk, dv,
                                scratch);
}

cudaError_t LaunchAttentionMerge(const AttentionDims& dims, const float* part_out,
                                 const float* part_lse, float* out, float* lse,
                                 cudaStream_t stream) {
  return attention::RunMerge(StreamLaunch{stream}, dims, part_out, part_lse, out, lse);
}

}  // namespace titan::cuda
