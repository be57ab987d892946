// Cross-entropy over a vocabulary in pieces (CpuCompute's), on raw device pointers: logits
// [n, v] hold the columns [first_column, first_column + v); targets of -100 are ignored. Sums run
// in f64 in a fixed tree; the loss and the counted rows stay on the device.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_CROSS_ENTROPY_KERNELS_H_
#define TITAN_PLUGINS_DEVICE_CUDA_CROSS_ENTROPY_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "activation.h"

namespace titan::cuda {

constexpr int32_t kIgnoreIndex = -100;

// logits and dlogits f32 or bf16 (activation.h): read into f32, written rounded once.
cudaError_t LaunchCrossEntropyRowMax(float* max, ActivationIn logits, int64_t n, int64_t v,
                                     cudaStream_t stream);
cudaError_t LaunchCrossEntropySumExp(float* sum, ActivationIn logits, const float* max, int64_t n,
                                     int64_t v, cudaStream_t stream);
cudaError_t LaunchCrossEntropyTargetLogit(float* target, ActivationIn logits,
                                          const int32_t* targets, int64_t n, int64_t v,
                                          int64_t first_column, cudaStream_t stream);
// sum_to_lse becomes max + log(sum); *loss = the mean of lse - target over counted rows (0 when
// none counts).
cudaError_t LaunchCrossEntropyFinish(float* sum_to_lse, const float* max, const float* target,
                                     const int32_t* targets, int64_t n, float* loss,
                                     cudaStream_t stream);
// dlogits = dloss * (softmax - onehot) / counted rows, in place when dlogits is logits;
// `count` is one int64 of scratch.
cudaError_t LaunchCrossEntropyBackward(ActivationOut dlogits, ActivationIn logits, const float* lse,
                                       const int32_t* targets, int64_t n, int64_t v, float dloss,
                                       int64_t first_column, int64_t* count, cudaStream_t stream);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_CROSS_ENTROPY_KERNELS_H_
