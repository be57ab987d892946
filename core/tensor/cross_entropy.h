// Softmax cross-entropy fused with its gradient: the probabilities are never stored, and the
// gradient can overwrite the logits in place (the largest activation of a Llama model).
#ifndef TITAN_CORE_TENSOR_CROSS_ENTROPY_H_
#define TITAN_CORE_TENSOR_CROSS_ENTROPY_H_

#include <cstdint>

#include "core/tensor/internal/vector_math.h"

namespace titan {

// Rows whose target is this are left out of the loss and its mean, as PyTorch's default.
inline constexpr int32_t kIgnoreIndex = -100;

// logits [n, v], targets [n]. Saves lse[n] (log-sum-exp of each row); returns the mean loss
// over the rows that count (0 when none does).
template <typename T>
T CrossEntropyForward(T* lse, const T* logits, const int32_t* targets, int64_t n, int64_t v);

// dlogits = dloss * (softmax(logits) - onehot(target)) / count. Overwrites dlogits, which may
// be the logits buffer itself. The logits may be the columns [first_column, first_column + v)
// of a wider vocabulary (the vocabulary-parallel loss), `lse` being that of the whole rows.
template <typename T>
void CrossEntropyBackward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                          int64_t n, int64_t v, T dloss, int64_t first_column = 0);

// The pieces of the forward for logits split by columns across ranks (Megatron's
// vocabulary-parallel cross-entropy, TorchTitan's loss parallel): each rank holds the columns
// [first_column, first_column + v) of every row, and the caller reduces each piece across the
// ranks between the calls (max, then sum, then sum), so the whole logits never meet.
// CrossEntropyForward is these pieces on one rank.
template <typename T>
void CrossEntropyRowMax(T* max, const T* logits, int64_t n, int64_t v);
// sum[i] = sum over j of exp(logits[i, j] - max[i]), max being the whole row's.
template <typename T>
void CrossEntropySumExp(T* sum, const T* logits, const T* max, int64_t n, int64_t v);
// target[i] = the logit of row i's target when these columns hold it, else 0.
template <typename T>
void CrossEntropyTargetLogit(T* target, const T* logits, const int32_t* targets, int64_t n,
                             int64_t v, int64_t first_column);
// From the reduced pieces: lse[i] = max[i] + log(sum[i]) (in place of sum), and the mean over the
// rows that count of lse[i] - target[i].
template <typename T>
T CrossEntropyFinish(T* sum_to_lse, const T* max, const T* target, const int32_t* targets,
                     int64_t n);

// One row of CrossEntropyRowMax, CrossEntropySumExp and of CrossEntropyBackward before the
// target's column: the reference loops and the vector kernels' fallback
// (core/tensor/vector_kernels.h) run these.
// The row's maximum in order, an element taken where it exceeds the maximum so far: NaN where
// row[0] is NaN, else the largest of the others that are not NaN.
template <typename T>
inline T CrossEntropyRowMaxOf(const T* row, int64_t v) {
  T top = row[0];
  for (int64_t j = 1; j < v; ++j) top = row[j] > top ? row[j] : top;
  return top;
}

template <typename T>
inline T CrossEntropySumExpRow(const T* row, T shift, int64_t v) {
  double total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < v; ++j) total += internal::VectorExp(row[j] - shift);
  return static_cast<T>(total);
}

// The scale of CrossEntropyBackward's rows: dloss / the number of rows that count, 0 when none
// does (and for an ignored row).
template <typename T>
T CrossEntropyGradScale(const int32_t* targets, int64_t n, T dloss);

// grad[j] = exp(row[j] - lse) * scale; grad may be row itself.
template <typename T>
inline void CrossEntropySoftmaxRow(T* grad, const T* row, T lse, T scale, int64_t v) {
#pragma omp simd
  for (int64_t j = 0; j < v; ++j) grad[j] = internal::VectorExp(row[j] - lse) * scale;
}

// Then the target's column, when these columns [first_column, first_column + v) hold it.
template <typename T>
inline void CrossEntropySubtractTarget(T* grad, int32_t target, int64_t v, int64_t first_column,
                                       T scale) {
  const int64_t column = target - first_column;
  if (target != kIgnoreIndex && column >= 0 && column < v) grad[column] -= scale;
}

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_CROSS_ENTROPY_H_
