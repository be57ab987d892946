// An activation operand on the device as the kernels' launchers take it: its memory and whether its
// elements are bf16 (else f32). Host code, no SDK types (nvcc builds the launchers as C++17).
#ifndef TITAN_PLUGINS_DEVICE_CUDA_ACTIVATION_H_
#define TITAN_PLUGINS_DEVICE_CUDA_ACTIVATION_H_

namespace titan::cuda {

struct ActivationIn {
  const void* data;
  bool bf16;
};

struct ActivationOut {
  void* data;
  bool bf16;
};

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_ACTIVATION_H_
