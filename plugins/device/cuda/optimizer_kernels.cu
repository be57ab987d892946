#include "kernel_util.cuh"
#include "optimizer_kernels.h"

namespace titan::cuda {
namespace {

__global__ void AdamKernel(AdamConstants u, float* param, const float* grad, float* m, float* v,
                           int64_t n) {
  TITAN_GRID_STRIDE(i, n) {
    float g = grad[i];
    float p = param[i];
    if (u.decoupled) {
      p *= u.decoupled_scale;
    } else {
      g += u.decay * p;
    }
    const float mi = u.beta1 * m[i] + (1.0f - u.beta1) * g;
    const float vi = u.beta2 * v[i] + (1.0f - u.beta2) * g * g;
    const float denom = sqrtf(vi) / u.bias_correction2_sqrt + u.eps;
    m[i] = mi;
    v[i] = vi;
    param[i] = p - u.step_size * mi / denom;
  }
}

__global__ void SgdKernel(SgdConstants u, float* param, const float* grad, float* buffer,
                          int64_t n) {
  TITAN_GRID_STRIDE(i, n) {
    float g = grad[i];
    if (u.decay != 0.0f) g += u.decay * param[i];  // as torch: an infinite weight keeps its grad
    if (u.momentum) {
      buffer[i] = u.first ? g : u.mu * buffer[i] + u.keep * g;
      g = u.nesterov ? g + u.mu * buffer[i] : buffer[i];
    }
    param[i] -= u.lr * g;
  }
}

}  // namespace

cudaError_t LaunchAdamStep(const AdamConstants& constants, float* params, const float* grads,
                           float* exp_avg, float* exp_avg_sq, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AdamKernel<<<BlocksFor(n), kThreads, 0, stream>>>(constants, params, grads, exp_avg, exp_avg_sq,
                                                    n);
  return cudaGetLastError();
}

cudaError_t LaunchSgdStep(const SgdConstants& constants, float* params, const float* grads,
                          float* momentum_buffer, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SgdKernel<<<BlocksFor(n), kThreads, 0, stream>>>(constants, params, grads, momentum_buffer, n);
  return cudaGetLastError();
}

}  // namespace titan::cuda
