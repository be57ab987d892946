// Activations in the kernels: an operand's elements are float or bf16 (uint16_t bits); a kernel
// templated on them reads each into f32 (Load) and rounds what it writes once, to nearest even
// (Store), so its arithmetic is the f32 kernel's. WithElement picks the template's type from an
// operand's dtype on the host.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_ACTIVATION_CUH_
#define TITAN_PLUGINS_DEVICE_CUDA_ACTIVATION_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "activation.h"
#include "float_convert.cuh"

namespace titan::cuda {

__device__ inline float Load(const float* x, int64_t i) { return x[i]; }
__device__ inline float Load(const uint16_t* x, int64_t i) { return Bf16ToF32(x[i]); }
__device__ inline void Store(float* x, int64_t i, float value) { x[i] = value; }
__device__ inline void Store(uint16_t* x, int64_t i, float value) { x[i] = F32ToBf16(value); }

// f(a value of the element type): uint16_t for bf16, else float.
template <typename F>
cudaError_t WithElement(bool bf16, F&& f) {
  if (bf16) return f(uint16_t{});
  return f(float{});
}

// An operand's memory as the element type of `tag` (the value WithElement passed).
template <typename T>
const T* As(const ActivationIn& x, T /*tag*/) {
  return static_cast<const T*>(x.data);
}
template <typename T>
T* As(const ActivationOut& x, T /*tag*/) {
  return static_cast<T*>(x.data);
}

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_ACTIVATION_CUH_
