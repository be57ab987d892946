// The SwiGLU gate of the feed-forward: out = silu(a) * b, with a = x.w1^T and b = x.w3^T
// computed by matmuls around it. Fused so neither silu(a) nor sigmoid(a) is stored.
#ifndef TITAN_CORE_TENSOR_SWIGLU_H_
#define TITAN_CORE_TENSOR_SWIGLU_H_

#include <cstdint>

namespace titan {

template <typename T>
void SwiGluForward(T* out, const T* a, const T* b, int64_t n);

// da += dout * b * silu'(a), db += dout * silu(a).
template <typename T>
void SwiGluBackward(T* da, T* db, const T* dout, const T* a, const T* b, int64_t n);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_SWIGLU_H_
