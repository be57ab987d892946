// The cross-entropy's kernels (cross_entropy_kernels.h says what each computes), templated on the
// element types of the logits and their gradient (activation.cuh: float, or bf16 read into f32
// and written rounded once). Run* enqueue them through launch(kernel, blocks, threads,
// shared_bytes, arguments...): StreamLaunch on a GPU, the emulation's launcher in the tests.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_CROSS_ENTROPY_KERNELS_CUH_
#define TITAN_PLUGINS_DEVICE_CUDA_CROSS_ENTROPY_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "activation.cuh"
#include "cross_entropy_kernels.h"
#include "kernel_util.cuh"

namespace titan::cuda::cross_entropy {

// One block per row in the row kernels.
template <typename L>
__global__ void RowMaxKernel(float* max, const L* logits, int64_t v) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * v;
  float top = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += kThreads) top = fmaxf(top, Load(logits, row + j));
  top = BlockMax(top);
  if (threadIdx.x == 0) max[blockIdx.x] = top;
}

template <typename L>
__global__ void SumExpKernel(float* sum, const L* logits, const float* max, int64_t v) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * v;
  const float shift = max[blockIdx.x];
  double total = 0;
  for (int64_t j = threadIdx.x; j < v; j += kThreads) total += expf(Load(logits, row + j) - shift);
  total = BlockSum(total);
  if (threadIdx.x == 0) sum[blockIdx.x] = static_cast<float>(total);
}

template <typename L>
__global__ void TargetLogitKernel(float* target, const L* logits, const int32_t* targets, int64_t n,
                                  int64_t v, int64_t first_column) {
  TITAN_GRID_STRIDE(i, n) {
    const int64_t column = targets[i] - first_column;
    const bool here = targets[i] != kIgnoreIndex && column >= 0 && column < v;
    target[i] = here ? Load(logits, i * v + column) : 0.0f;
  }
}

// One block.
__global__ void FinishKernel(float* sum_to_lse, const float* max, const float* target,
                             const int32_t* targets, int64_t n, float* loss) {
  double total = 0;
  double count = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    const float lse = max[i] + logf(sum_to_lse[i]);
    sum_to_lse[i] = lse;
    if (targets[i] != kIgnoreIndex) {
      total += static_cast<double>(lse) - target[i];
      count += 1;
    }
  }
  total = BlockSum(total);
  count = BlockSum(count);
  if (threadIdx.x == 0) *loss = count == 0 ? 0.0f : static_cast<float>(total / count);
}

__global__ void CountKernel(const int32_t* targets, int64_t n, int64_t* count) {
  double counted = 0;  // exact below 2^53 rows
  for (int64_t i = threadIdx.x; i < n; i += kThreads) counted += targets[i] != kIgnoreIndex;
  counted = BlockSum(counted);
  if (threadIdx.x == 0) *count = static_cast<int64_t>(counted);
}

// Each element is read before it is written, so dlogits may be the logits' memory.
template <typename L, typename D>
__global__ void BackwardKernel(D* dlogits, const L* logits, const float* lse,
                               const int32_t* targets, int64_t n, int64_t v, float dloss,
                               int64_t first_column, const int64_t* count) {
  const float scale = *count == 0 ? 0.0f : dloss / static_cast<float>(*count);
  TITAN_GRID_STRIDE(at, n * v) {
    const int64_t i = at / v, j = at % v;
    const float row_scale = targets[i] == kIgnoreIndex ? 0.0f : scale;
    float grad = expf(Load(logits, at) - lse[i]) * row_scale;
    if (targets[i] != kIgnoreIndex && targets[i] - first_column == j) grad -= row_scale;
    Store(dlogits, at, grad);
  }
}

template <typename Launch>
cudaError_t RunRowMax(Launch&& launch, float* max, ActivationIn logits, int64_t n, int64_t v) {
  if (n == 0) return cudaSuccess;
  return WithElement(logits.bf16, [&](auto l) {
    return launch(RowMaxKernel<decltype(l)>, n, kThreads, size_t{0}, max, As(logits, l), v);
  });
}

template <typename Launch>
cudaError_t RunSumExp(Launch&& launch, float* sum, ActivationIn logits, const float* max, int64_t n,
                      int64_t v) {
  if (n == 0) return cudaSuccess;
  return WithElement(logits.bf16, [&](auto l) {
    return launch(SumExpKernel<decltype(l)>, n, kThreads, size_t{0}, sum, As(logits, l), max, v);
  });
}

template <typename Launch>
cudaError_t RunTargetLogit(Launch&& launch, float* target, ActivationIn logits,
                           const int32_t* targets, int64_t n, int64_t v, int64_t first_column) {
  if (n == 0) return cudaSuccess;
  return WithElement(logits.bf16, [&](auto l) {
    return launch(TargetLogitKernel<decltype(l)>, BlocksFor(n), kThreads, size_t{0}, target,
                  As(logits, l), targets, n, v, first_column);
  });
}

template <typename Launch>
cudaError_t RunFinish(Launch&& launch, float* sum_to_lse, const float* max, const float* target,
                      const int32_t* targets, int64_t n, float* loss) {
  return launch(FinishKernel, 1, kThreads, size_t{0}, sum_to_lse, max, target, targets, n, loss);
}

// `count`: one int64_t of device scratch.
template <typename Launch>
cudaError_t RunBackward(Launch&& launch, ActivationOut dlogits, ActivationIn logits,
                        const float* lse, const int32_t* targets, int64_t n, int64_t v, float dloss,
                        int64_t first_column, int64_t* count) {
  if (n * v == 0) return cudaSuccess;
  const cudaError_t counted = launch(CountKernel, 1, kThreads, size_t{0}, targets, n, count);
  if (counted != cudaSuccess) return counted;
  return WithElement(logits.bf16, [&](auto l) {
    return WithElement(dlogits.bf16, [&](auto d) {
      return launch(BackwardKernel<decltype(l), decltype(d)>, BlocksFor(n * v), kThreads, size_t{0},
                    As(dlogits, d), As(logits, l), lse, targets, n, v, dloss, first_column,
                    static_cast<const int64_t*>(count));
    });
  });
}

}  // namespace titan::cuda::cross_entropy

#endif  // TITAN_PLUGINS_DEVICE_CUDA_CROSS_ENTROPY_KERNELS_CUH_
