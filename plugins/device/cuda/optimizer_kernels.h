// Fused optimizer updates on raw device pointers, one thread per parameter, the arithmetic of
// CpuCompute::AdamStep / SgdStep (torch.optim's) step for step. The host computes the per-step
// constants in f64 exactly as the CPU does and passes them in f32.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_OPTIMIZER_KERNELS_H_
#define TITAN_PLUGINS_DEVICE_CUDA_OPTIMIZER_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace titan::cuda {

struct AdamConstants {
  float beta1, beta2, step_size, bias_correction2_sqrt, eps, decay, decoupled_scale;
  bool decoupled;
};
cudaError_t LaunchAdamStep(const AdamConstants& constants, float* params, const float* grads,
                           float* exp_avg, float* exp_avg_sq, int64_t n, cudaStream_t stream);

struct SgdConstants {
  float lr, decay, mu, keep;
  bool momentum, first, nesterov;
};
cudaError_t LaunchSgdStep(const SgdConstants& constants, float* params, const float* grads,
                          float* momentum_buffer, int64_t n, cudaStream_t stream);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_OPTIMIZER_KERNELS_H_
