// Causal self-attention with grouped-query heads, computed a tile of query rows at a time with
// BLAS (as flash attention tiles it), so no [t, t] matrix is ever built: memory stays linear in
// the sequence length.
#ifndef TITAN_CORE_TENSOR_ATTENTION_H_
#define TITAN_CORE_TENSOR_ATTENTION_H_

#include <cstdint>

namespace titan {

struct AttentionShape {
  int64_t batch, seq_len, heads, kv_heads, head_dim;  // heads is a multiple of kv_heads
};

// q, out [b, t, heads, hd]; k, v [b, t, kv_heads, hd]; query head h reads kv head
// h / (heads / kv_heads). Saves lse [b, heads, t], the log-sum-exp of each softmax row.
template <typename T>
void AttentionForward(T* out, T* lse, const T* q, const T* k, const T* v,
                      const AttentionShape& shape);

// Recomputes the probabilities from lse tile by tile. dq, dk and dv accumulate; each task owns
// one kv head of one batch row, which keeps every sum race-free and deterministic.
template <typename T>
void AttentionBackward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                       const T* out, const T* lse, const AttentionShape& shape);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_ATTENTION_H_
