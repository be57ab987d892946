// Causal attention with grouped-query heads on raw device pointers, in f32, by titan's tiled
// flash-attention kernels (attention_kernels.cuh): no [t, t] score matrix, the log-sum-exp of
// each row saved for the backward and for context parallelism's merge, and a backward whose sums
// each have one owner, so results repeat bit for bit.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_KERNELS_H_
#define TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "attention_tiles.h"

namespace titan::cuda {

constexpr int64_t kMaxAttentionHeadDim = 256;

// Queries that see no key get zeros and an lse of -inf.
cudaError_t LaunchAttentionForward(const AttentionDims& dims, const float* q, const float* k,
                                   const float* v, float* out, float* lse, cudaStream_t stream);
// dq, dk and dv accumulate; `scratch` holds batch * heads * seq_len floats (rowsum(dout * out)).
cudaError_t LaunchAttentionBackward(const AttentionDims& dims, const float* dout, const float* q,
                                    const float* k, const float* v, const float* out,
                                    const float* lse, float* dq, float* dk, float* dv,
                                    float* scratch, cudaStream_t stream);
// Folds part_out / part_lse into out / lse (CpuCompute::AttentionMerge).
cudaError_t LaunchAttentionMerge(const AttentionDims& dims, const float* part_out,
                                 const float* part_lse, float* out, float* lse,
                                 cudaStream_t stream);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_KERNELS_H_
