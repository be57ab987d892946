// Causal self-attention with grouped-query heads, computed a tile of query rows at a time with
// BLAS (as flash attention tiles it), so no [t, t] matrix is ever built: memory stays linear in
// the sequence length.
#ifndef TITAN_CORE_TENSOR_ATTENTION_H_
#define TITAN_CORE_TENSOR_ATTENTION_H_

#include <algorithm>
#include <cstdint>

namespace titan {

struct AttentionShape {
  int64_t batch, seq_len, heads, kv_heads, head_dim;  // heads is a multiple of kv_heads
  // Keys and values have kv_len positions (-1: seq_len). Query i sits `shift` positions after
  // key i (its global position minus the first key's, less i), and sees the keys j <= i + shift:
  // a context-parallel rank's chunk of queries against the keys before and in it.
  int64_t kv_len = -1, shift = 0;

  int64_t keys() const { return kv_len < 0 ? seq_len : kv_len; }
  // The keys query i sees: [0, visible(i)).
  int64_t visible(int64_t i) const { return std::clamp<int64_t>(i + shift + 1, 0, keys()); }
};

// q, out [b, t, heads, hd]; k, v [b, kv_len, kv_heads, hd]; query head h reads kv head
// h / (heads / kv_heads). Saves lse [b, heads, t], the log-sum-exp of each softmax row; a query
// that sees no key gets zeros and an lse of -inf.
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
