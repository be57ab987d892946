// Causal attention with grouped-query heads on raw device pointers, flash-attention style: a
// warp walks one query's keys with an online softmax, so no [t, t] score matrix exists. The
// backward recomputes the probabilities from the saved log-sum-exp; dq is summed by warps that
// own a query, dk and dv by warps that own a key, so nothing is added atomically and results
// repeat bit for bit.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_KERNELS_H_
#define TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace titan::cuda {

constexpr int64_t kMaxAttentionHeadDim = 256;

// q, out [batch, seq_len, heads, head_dim]; k, v [batch, kv_len, kv_heads, head_dim]; lse
// [batch, heads, seq_len]. Query i sees the keys j <= i + shift (shift = q_offset - kv_offset).
struct AttentionDims {
  int64_t batch, seq_len, kv_len, heads, kv_heads, head_dim, shift;
};

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
