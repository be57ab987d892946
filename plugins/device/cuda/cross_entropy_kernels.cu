#include "cross_entropy_kernels.h"
#include "kernel_util.cuh"

namespace titan::cuda {
namespace {

// One block per row in the row kernels.
__global__ void RowMaxKernel(float* max, const float* logits, int64_t v) {
  const float* row = logits + blockIdx.x * v;
  float top = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += kThreads) top = fmaxf(top, row[j]);
  top = BlockMax(top);
  if (threadIdx.x == 0) max[blockIdx.x] = top;
}

__global__ void SumExpKernel(float* sum, const float* logits, const float* max, int64_t v) {
  const float* row = logits + blockIdx.x * v;
  const float shift = max[blockIdx.x];
  double total = 0;
  for (int64_t j = threadIdx.x; j < v; j += kThreads) total += expf(row[j] - shift);
  total = BlockSum(total);
  if (threadIdx.x == 0) sum[blockIdx.x] = static_cast<float>(total);
}

__global__ void TargetLogitKernel(float* target, const float* logits, const int32_t* targets,
                                  int64_t n, int64_t v, int64_t first_column) {
  TITAN_GRID_STRIDE(i, n) {
    const int64_t column = targets[i] - first_column;
    const bool here = targets[i] != kIgnoreIndex && column >= 0 && column < v;
    target[i] = here ? logits[i * v + column] : 0.0f;
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

__global__ void BackwardKernel(float* dlogits, const float* logits, const float* lse,
                               const int32_t* targets, int64_t n, int64_t v, float dloss,
                               int64_t first_column, const int64_t* count) {
  const float scale = *count == 0 ? 0.0f : dloss / static_cast<float>(*count);
  TITAN_GRID_STRIDE(at, n * v) {
    const int64_t i = at / v, j = at % v;
    const float row_scale = targets[i] == kIgnoreIndex ? 0.0f : scale;
    float grad = expf(logits[at] - lse[i]) * row_scale;
    if (targets[i] != kIgnoreIndex && targets[i] - first_column == j) grad -= row_scale;
    dlogits[at] = grad;
  }
}

}  // namespace

cudaError_t LaunchCrossEntropyRowMax(float* max, const float* logits, int64_t n, int64_t v,
                                     cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  RowMaxKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(max, logits, v);
  return cudaGetLastError();
}

cudaError_t LaunchCrossEntropySumExp(float* sum, const float* logits, const float* max, int64_t n,
                                     int64_t v, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SumExpKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(sum, logits, max, v);
  return cudaGetLastError();
}

cudaError_t LaunchCrossEntropyTargetLogit(float* target, const float* logits,
                                          const int32_t* targets, int64_t n, int64_t v,
                                          int64_t first_column, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  TargetLogitKernel<<<BlocksFor(n), kThreads, 0, stream>>>(target, logits, targets, n, v,
                                                           first_column);
  return cudaGetLastError();
}

cudaError_t LaunchCrossEntropyFinish(float* sum_to_lse, const float* max, const float* target,
                                     const int32_t* targets, int64_t n, float* loss,
                                     cudaStream_t stream) {
  FinishKernel<<<1, kThreads, 0, stream>>>(sum_to_lse, max, target, targets, n, loss);
  return cudaGetLastError();
}

cudaError_t LaunchCrossEntropyBackward(float* dlogits, const float* logits, const float* lse,
                                       const int32_t* targets, int64_t n, int64_t v, float dloss,
                                       int64_t first_column, int64_t* count, cudaStream_t stream) {
  if (n * v == 0) return cudaSuccess;
  CountKernel<<<1, kThreads, 0, stream>>>(targets, n, count);
  BackwardKernel<<<BlocksFor(n * v), kThreads, 0, stream>>>(dlogits, logits, lse, targets, n, v,
                                                            dloss, first_column, count);
  return cudaGetLastError();
}

}  // namespace titan::cuda
