// The CUDA compute's operands: checked by titan/compute_operands.h against kCuda (tensors carry
// device index 0 for the process's one selected GPU, as the core tags them), read as T*.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_OPERANDS_H_
#define TITAN_PLUGINS_DEVICE_CUDA_OPERANDS_H_

#include <cstddef>
#include <cstdint>

#include "titan/compute_operands.h"

namespace titan::cuda {

inline constexpr DeviceType kCuda = DeviceType::kCuda;

template <typename T>
T* Data(const TensorView& x) {
  return static_cast<T*>(x.data);
}
inline float* F(const TensorView& x) { return Data<float>(x); }
inline const int32_t* I(const TensorView& x) { return Data<const int32_t>(x); }

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_OPERANDS_H_
