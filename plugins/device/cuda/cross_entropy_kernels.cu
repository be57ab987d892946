#include "cross_entropy_kernels.cuh"
#include "cross_entropy_kernels.h"
#include "kernel_util.cuh"

namespace titan::cuda {

cudaError_t LaunchCrossEntropyRowMax(float* max, ActivationIn logits, int64_t n, int64_t v,
                                     cudaStream_t stream) {
  return cross_entropy::RunRowMax(StreamLaunch{stream}, max, logits, n, v);
}

cudaError_t LaunchCrossEntropySumExp(float* sum, ActivationIn logits, const float* max, int64_t n,
                                     int64_t v, cudaStream_t stream) {
  return cross_entropy::RunSumExp(StreamLaunch{stream}, sum, logits, max, n, v);
}

cudaError_t LaunchCrossEntropyTargetLogit(float* target, ActivationIn logits,
                                          const int32_t* targets, int64_t n, int64_t v,
                                          int64_t first_column, cudaStream_t stream) {
  return cross_entropy::RunTargetLogit(StreamLaunch{stream}, target, logits, targets, n, v,
                                       first_column);
}

cudaError_t LaunchCrossEntropyFinish(float* sum_to_lse, const float* max, const float* target,
                                     const int32_t* targets, int64_t n, float* loss,
                                     cudaStream_t stream) {
  return cross_entropy::RunFinish(StreamLaunch{stream}, sum_to_lse, max, target, targets, n, loss);
}

cudaError_t LaunchCrossEntropyBackward(ActivationOut dlogits, ActivationIn logits, const float* lse,
                                       const int32_t* targets, int64_t n, int64_t v, float dloss,
                                       int64_t first_column, int64_t* count, cudaStream_t stream) {
  return cross_entropy::RunBackward(StreamLaunch{stream}, dlogits, logits, lse, targets, n, v,
                                    dloss, first_column, count);
}

}  // namespace titan::cuda
