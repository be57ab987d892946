// The SGD update of one f32 element, as torch.optim.SGD computes it (momentum, dampening, Nesterov,
// L2 weight decay): the scalar reference that core/tensor/vector_kernels.h's vector update is
// tested against and that finishes its tails.
#ifndef TITAN_CORE_TENSOR_SGD_H_
#define TITAN_CORE_TENSOR_SGD_H_

#include <cstdint>

#include "titan/compute_types.h"

namespace titan {

// One update's scalars, rounded to f32 once so that every element sees the same ones.
struct SgdConstants {
  float lr, decay, momentum, keep;  // keep = 1 - dampening
  bool has_decay, has_momentum, first, nesterov;
};

inline SgdConstants MakeSgdConstants(const SgdUpdate& u) {
  SgdConstants c;
  c.lr = static_cast<float>(u.lr);
  c.decay = static_cast<float>(u.weight_decay);
  c.momentum = static_cast<float>(u.momentum);
  c.keep = static_cast<float>(1.0 - u.dampening);
  c.has_decay = u.weight_decay != 0.0;
  c.has_momentum = u.momentum != 0.0;
  c.first = u.step == 1;
  c.nesterov = u.nesterov;
  return c;
}

// Each operation is one IEEE f32 operation in this order; the vector update repeats them lane by
// lane (no fused multiply-add), so both give the same bits. As torch, the decay term is left out
// when weight_decay is 0 (so an infinite weight does not turn its gradient into NaN), and the
// first step's buffer is the gradient itself.
inline void SgdElement(const SgdConstants& c, float& param, float grad, float* buffer) {
  float g = grad;
  if (c.has_decay) g = g + c.decay * param;
  if (c.has_momentum) {
    *buffer = c.first ? g : c.momentum * *buffer + c.keep * g;
    g = c.nesterov ? g + c.momentum * *buffer : *buffer;
  }
  param = param - c.lr * g;
}

// buffer may be null without momentum.
inline void ScalarSgdUpdate(const SgdConstants& c, float* param, const float* grad, float* buffer,
                            int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    SgdElement(c, param[i], grad[i], c.has_momentum ? buffer + i : nullptr);
  }
}

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_SGD_H_
