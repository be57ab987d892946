// Fused optimizer updates of the CUDA compute; the per-step constants as CpuCompute computes
// them.
#include <cmath>

#include "cuda_compute.h"
#include "cuda_status.h"
#include "operands.h"
#include "optimizer_kernels.h"

namespace titan::cuda {

absl::Status CudaCompute::RunAdamStep(const AdamUpdate& u, TensorView params,
                                      const TensorView& grads, TensorView exp_avg,
                                      TensorView exp_avg_sq) {
  const int64_t n = params.numel();
  TITAN_RETURN_IF_ERROR(Ready());
  const double t = static_cast<double>(u.step);
  const AdamConstants constants{static_cast<float>(u.beta1),
                                static_cast<float>(u.beta2),
                                static_cast<float>(u.lr / (1.0 - std::pow(u.beta1, t))),
                                static_cast<float>(std::sqrt(1.0 - std::pow(u.beta2, t))),
                                static_cast<float>(u.eps),
                                static_cast<float>(u.weight_decay),
                                static_cast<float>(1.0 - u.lr * u.weight_decay),
                                u.decoupled_weight_decay};
  return Check(
      LaunchAdamStep(constants, F(params), F(grads), F(exp_avg), F(exp_avg_sq), n, stream_),
      "AdamStep kernel launch");
}

absl::Status CudaCompute::RunSgdStep(const SgdUpdate& u, TensorView params, const TensorView& grads,
                                     TensorView momentum_buffer) {
  const int64_t n = params.numel();
  const bool momentum = u.momentum != 0.0;
  TITAN_RETURN_IF_ERROR(Ready());
  const SgdConstants constants{static_cast<float>(u.lr),
                               static_cast<float>(u.weight_decay),
                               static_cast<float>(u.momentum),
                               static_cast<float>(1.0 - u.dampening),
                               momentum,
                               u.step == 1,
                               u.nesterov};
  return Check(LaunchSgdStep(constants, F(params), F(grads),
                             momentum ? F(momentum_buffer) : nullptr, n, stream_),
               "SgdStep kernel launch");
}

}  // namespace titan::cuda
