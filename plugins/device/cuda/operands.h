// The CUDA compute's operands, read as T*. The compute interface has checked them by the kernel
// table's checks (titan/compute_operands.h) before any of this plugin's code runs.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_OPERANDS_H_
#define TITAN_PLUGINS_DEVICE_CUDA_OPERANDS_H_

#include <cstddef>
#include <cstdint>

#include "activation.h"
#include "titan/compute_operands.h"

namespace titan::cuda {

template <typename T>
T* Data(const TensorView& x) {
  return static_cast<T*>(x.data);
}
inline float* F(const TensorView& x) { return Data<float>(x); }
inline const int32_t* I(const TensorView& x) { return Data<const int32_t>(x); }
// An activation operand (f32 or bf16, as its check allowed) for the launchers.
inline ActivationIn In(const TensorView& x) { return {x.data, x.dtype == DType::kBF16}; }
inline ActivationOut Out(const TensorView& x) { return {x.data, x.dtype == DType::kBF16}; }

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_OPERANDS_H_
