// The SwiGLU gate of the feed-forward: out = silu(a) * b, with a = x.w1^T and b = x.w3^T
// computed by matmuls around it. Fused so neither silu(a) nor sigmoid(a) is stored.
#ifndef TITAN_CORE_TENSOR_SWIGLU_H_
#define TITAN_CORE_TENSOR_SWIGLU_H_

#include <cstdint>

#include "core/tensor/internal/vector_math.h"

namespace titan {

// One element of each: the reference loops below and the vector kernels' fallback
// (core/tensor/vector_kernels.h) run these.
template <typename T>
inline T SwiGluElement(T a, T b) {
  return a / (T{1} + internal::VectorExp(-a)) * b;
}

template <typename T>
inline void SwiGluBackwardElement(T& da, T& db, T dout, T a, T b) {
  const T sigmoid = T{1} / (T{1} + internal::VectorExp(-a));
  const T silu = a * sigmoid;
  // silu'(a) = sigmoid(a) * (1 + a * (1 - sigmoid(a)))
  da += dout * b * sigmoid * (T{1} + a * (T{1} - sigmoid));
  db += dout * silu;
}

template <typename T>
void SwiGluForward(T* out, const T* a, const T* b, int64_t n);

// da += dout * b * silu'(a), db += dout * silu(a).
template <typename T>
void SwiGluBackward(T* da, T* db, const T* dout, const T* a, const T* b, int64_t n);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_SWIGLU_H_
