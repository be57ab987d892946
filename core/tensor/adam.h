// The fused Adam/AdamW update of one f32 element, as torch.optim computes it: the scalar reference
// that core/tensor/vector_kernels.h's vector update is tested against and that finishes its tails.
#ifndef TITAN_CORE_TENSOR_ADAM_H_
#define TITAN_CORE_TENSOR_ADAM_H_

#include <cmath>
#include <cstdint>

#include "titan/compute_types.h"

namespace titan {

// One update's scalars, rounded to f32 once so that every element sees the same ones.
struct AdamConstants {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  float eps;
  float decay;            // weight decay added to the gradient (Adam)
  float decoupled_scale;  // 1 - lr * weight_decay, applied to the weights (AdamW)
  bool decoupled;
};

inline AdamConstants MakeAdamConstants(const AdamUpdate& u) {
  const double t = static_cast<double>(u.step);
  AdamConstants c;
  c.beta1 = static_cast<float>(u.beta1);
  c.one_minus_beta1 = 1.0f - c.beta1;
  c.beta2 = static_cast<float>(u.beta2);
  c.one_minus_beta2 = 1.0f - c.beta2;
  c.step_size = static_cast<float>(u.lr / (1.0 - std::pow(u.beta1, t)));
  c.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(u.beta2, t)));
  c.eps = static_cast<float>(u.eps);
  c.decay = static_cast<float>(u.weight_decay);
  c.decoupled_scale = static_cast<float>(1.0 - u.lr * u.weight_decay);
  c.decoupled = u.decoupled_weight_decay;
  return c;
}

// Each operation is one IEEE f32 operation in this order; the vector update repeats them lane by
// lane (no fused multiply-add), so both give the same bits.
inline void AdamElement(const AdamConstants& c, float& param, float grad, float& m, float& v) {
  if (c.decoupled) {
    param = param * c.decoupled_scale;
  } else {
    grad = grad + c.decay * param;
  }
  m = c.beta1 * m + c.one_minus_beta1 * grad;
  v = c.beta2 * v + c.one_minus_beta2 * grad * grad;
  const float denom = std::sqrt(v) / c.bias_correction2_sqrt + c.eps;
  param = param - c.step_size * m / denom;
}

inline void ScalarAdamUpdate(const AdamConstants& c, float* param, const float* grad, float* m,
                             float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) AdamElement(c, param[i], grad[i], m[i], v[i]);
}

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_ADAM_H_
