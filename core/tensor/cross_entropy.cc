#include "core/tensor/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace titan {
namespace {

int64_t CountTargets(const int32_t* targets, int64_t n) {
  return std::count_if(targets, targets + n, [](int32_t t) { return t != kIgnoreIndex; });
}

}  // namespace

template <typename T>
void CrossEntropyRowMax(T* max, const T* logits, int64_t n, int64_t v) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) max[i] = CrossEntropyRowMaxOf(logits + i * v, v);
}

template <typename T>
void CrossEntropySumExp(T* sum, const T* logits, const T* max, int64_t n, int64_t v) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    sum[i] = CrossEntropySumExpRow(logits + i * v, max[i], v);
  }
}

template <typename T>
void CrossEntropyTargetLogit(T* target, const T* logits, const int32_t* targets, int64_t n,
                             int64_t v, int64_t first_column) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t column = targets[i] - first_column;
    const bool here = targets[i] != kIgnoreIndex && column >= 0 && column < v;
    target[i] = here ? logits[i * v + column] : T{0};
  }
}

template <typename T>
T CrossEntropyFinish(T* sum_to_lse, const T* max, const T* target, const int32_t* targets,
                     int64_t n) {
  for (int64_t i = 0; i < n; ++i) sum_to_lse[i] = max[i] + std::log(sum_to_lse[i]);
  // Summed in row order, so the loss does not depend on thread count.
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] != kIgnoreIndex) total += static_cast<double>(sum_to_lse[i]) - target[i];
  }
  const int64_t count = CountTargets(targets, n);
  return count == 0 ? T{0} : static_cast<T>(total / count);
}

template <typename T>
T CrossEntropyForward(T* lse, const T* logits, const int32_t* targets, int64_t n, int64_t v) {
  std::vector<T> max(n), target(n);
  CrossEntropyRowMax(max.data(), logits, n, v);
  CrossEntropySumExp(lse, logits, max.data(), n, v);
  CrossEntropyTargetLogit(target.data(), logits, targets, n, v, 0);
  return CrossEntropyFinish(lse, max.data(), target.data(), targets, n);
}

template <typename T>
T CrossEntropyGradScale(const int32_t* targets, int64_t n, T dloss) {
  const int64_t count = CountTargets(targets, n);
  return count == 0 ? T{0} : dloss / static_cast<T>(count);
}

template <typename T>
void CrossEntropyBackward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                          int64_t n, int64_t v, T dloss, int64_t first_column) {
  const T scale = CrossEntropyGradScale(targets, n, dloss);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    T* grad = dlogits + i * v;
    const T row_scale = targets[i] == kIgnoreIndex ? T{0} : scale;
    CrossEntropySoftmaxRow(grad, logits + i * v, lse[i], row_scale, v);
    CrossEntropySubtractTarget(grad, targets[i], v, first_column, row_scale);
  }
}

template float CrossEntropyForward(float*, const float*, const int32_t*, int64_t, int64_t);
template double CrossEntropyForward(double*, const double*, const int32_t*, int64_t, int64_t);
template void CrossEntropyBackward(float*, const float*, const float*, const int32_t*, int64_t,
                                   int64_t, float, int64_t);
template void CrossEntropyBackward(double*, const double*, const double*, const int32_t*, int64_t,
                                   int64_t, double, int64_t);
template float CrossEntropyGradScale(const int32_t*, int64_t, float);
template double CrossEntropyGradScale(const int32_t*, int64_t, double);
template void CrossEntropyRowMax(float*, const float*, int64_t, int64_t);
template void CrossEntropySumExp(float*, const float*, const float*, int64_t, int64_t);
template void CrossEntropyTargetLogit(float*, const float*, const int32_t*, int64_t, int64_t,
                                      int64_t);
template float CrossEntropyFinish(float*, const float*, const float*, const int32_t*, int64_t);

}  // namespace titan
