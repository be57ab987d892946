#include "core/tensor/cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace titan {
namespace {

int64_t CountTargets(const int32_t* targets, int64_t n) {
  return std::count_if(targets, targets + n, [](int32_t t) { return t != kIgnoreIndex; });
}

}  // namespace

template <typename T>
T CrossEntropyForward(T* lse, const T* logits, const int32_t* targets, int64_t n, int64_t v) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T* row = logits + i * v;
    const T max = *std::max_element(row, row + v);
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(row[j] - max);
    lse[i] = max + static_cast<T>(std::log(sum));
  }
  // Summed in row order after the parallel part, so the loss does not depend on thread count.
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] != kIgnoreIndex)
      total += static_cast<double>(lse[i]) - logits[i * v + targets[i]];
  }
  const int64_t count = CountTargets(targets, n);
  return count == 0 ? T{0} : static_cast<T>(total / count);
}

template <typename T>
void CrossEntropyBackward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                          int64_t n, int64_t v, T dloss) {
  const int64_t count = CountTargets(targets, n);
  const T scale = count == 0 ? T{0} : dloss / static_cast<T>(count);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    T* grad = dlogits + i * v;
    const T* row = logits + i * v;
    const T row_scale = targets[i] == kIgnoreIndex ? T{0} : scale;
    for (int64_t j = 0; j < v; ++j) grad[j] = std::exp(row[j] - lse[i]) * row_scale;
    if (targets[i] != kIgnoreIndex) grad[targets[i]] -= row_scale;
  }
}

template float CrossEntropyForward(float*, const float*, const int32_t*, int64_t, int64_t);
template double CrossEntropyForward(double*, const double*, const int32_t*, int64_t, int64_t);
template void CrossEntropyBackward(float*, const float*, const float*, const int32_t*, int64_t,
                                   int64_t, float);
template void CrossEntropyBackward(double*, const double*, const double*, const int32_t*, int64_t,
                                   int64_t, double);

}  // namespace titan
