// Softmax cross-entropy fused with its gradient: the probabilities are never stored, and the
// gradient can overwrite the logits in place (the largest activation of a Llama model).
#ifndef TITAN_CORE_TENSOR_CROSS_ENTROPY_H_
#define TITAN_CORE_TENSOR_CROSS_ENTROPY_H_

#include <cstdint>

namespace titan {

// Rows whose target is this are left out of the loss and its mean, as PyTorch's default.
inline constexpr int32_t kIgnoreIndex = -100;

// logits [n, v], targets [n]. Saves lse[n] (log-sum-exp of each row); returns the mean loss
// over the rows that count (0 when none does).
template <typename T>
T CrossEntropyForward(T* lse, const T* logits, const int32_t* targets, int64_t n, int64_t v);

// dlogits = dloss * (softmax(logits) - onehot(target)) / count. Overwrites dlogits, which may
// be the logits buffer itself.
template <typename T>
void CrossEntropyBackward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                          int64_t n, int64_t v, T dloss);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_CROSS_ENTROPY_H_
