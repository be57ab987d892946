// Element-wise ops over contiguous runs: the residual adds and gradient accumulation.
#ifndef TITAN_CORE_TENSOR_ELEMENTWISE_H_
#define TITAN_CORE_TENSOR_ELEMENTWISE_H_

#include <cstdint>

namespace titan {

// out = a + b (out may alias a or b).
template <typename T>
void AddForward(T* out, const T* a, const T* b, int64_t n);

// da += dout, db += dout; either may be null.
template <typename T>
void AddBackward(T* da, T* db, const T* dout, int64_t n);

// out = a * b (out may alias a or b).
template <typename T>
void MulForward(T* out, const T* a, const T* b, int64_t n);

// da += dout * b, db += dout * a; either may be null.
template <typename T>
void MulBackward(T* da, T* db, const T* dout, const T* a, const T* b, int64_t n);

// x *= scale.
template <typename T>
void Scale(T* x, T scale, int64_t n);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_ELEMENTWISE_H_
