// What the f32 and bf16 attention kernels share: where a head's rows sit in the [b, t, heads, hd]
// layouts, the softmax scale and the masked exponential of one score row.
#ifndef TITAN_CORE_TENSOR_INTERNAL_ATTENTION_LAYOUT_H_
#define TITAN_CORE_TENSOR_INTERNAL_ATTENTION_LAYOUT_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/tensor/attention.h"
#include "core/tensor/internal/vector_math.h"

namespace titan::internal {

// Offsets into the [b, t, heads, hd] and [b, t, kv_heads, hd] layouts; consecutive positions of
// one head are q_stride (kv_stride) elements apart, which BLAS takes as the leading dimension.
struct AttentionLayout {
  const AttentionShape& s;
  int64_t q_stride() const { return s.heads * s.head_dim; }
  int64_t kv_stride() const { return s.kv_heads * s.head_dim; }
  int64_t q(int64_t b, int64_t i, int64_t h) const {
    return ((b * s.seq_len + i) * s.heads + h) * s.head_dim;
  }
  int64_t kv(int64_t b, int64_t j, int64_t h) const {
    return ((b * s.keys() + j) * s.kv_heads + h) * s.head_dim;
  }
  int64_t lse(int64_t b, int64_t h, int64_t i) const { return (b * s.heads + h) * s.seq_len + i; }
};

template <typename T>
T AttentionScale(const AttentionShape& s) {
  return static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
}

// Row r of a tile starting at query i0 sees keys [0, visible(i0 + r)); the rest of its `keys`
// columns are masked to probability 0.
template <typename T>
void MaskedExp(T* row, T shift, int64_t visible, int64_t keys) {
#pragma omp simd
  for (int64_t j = 0; j < visible; ++j) row[j] = VectorExp(row[j] - shift);
  std::fill(row + visible, row + keys, T{0});
}

}  // namespace titan::internal

#endif  // TITAN_CORE_TENSOR_INTERNAL_ATTENTION_LAYOUT_H_
