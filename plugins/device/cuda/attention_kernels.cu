#include "attention_kernels.cuh"
#include "attention_kernels.h"

namespace titan::cuda {

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
