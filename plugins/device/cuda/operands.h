// The CUDA compute's checks of its operands, as the CPU's (core/tensor/internal/operands.h) but
// against the GPU: on cuda, of the expected dtype, size and rank, contiguous and allocated. Each
// failure names the kernel and the operand. Tensors carry device index 0 for the process's one
// selected GPU, as the core tags them.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_OPERANDS_H_
#define TITAN_PLUGINS_DEVICE_CUDA_OPERANDS_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan::cuda {

inline absl::Status Expect(const char* kernel, const char* operand, const TensorView& x,
                           DType dtype, int64_t numel = -1) {
  if (x.device.type != DeviceType::kCuda) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": operand '", operand, "' is on ",
                     x.device.type == DeviceType::kCpu ? "cpu" : "another device", ":",
                     x.device.index, ", but this compute runs on cuda:0"));
  }
  if (x.dtype != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": operand '", operand, "' expected ",
                                                   DTypeName(dtype), ", found ",
                                                   DTypeName(x.dtype)));
  }
  if (numel >= 0 && x.numel() != numel) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": operand '", operand, "' expected ",
                                                   numel, " elements, found ", x.numel()));
  }
  if (!x.is_contiguous() || (x.data == nullptr && x.numel() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": operand '", operand, "' must be contiguous and allocated"));
  }
  return absl::OkStatus();
}

inline absl::Status ExpectRank(const char* kernel, const char* operand, const TensorView& x,
                               size_t rank) {
  if (x.shape.size() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": operand '", operand, "' expected ",
                                                   rank, " dimensions, found ", x.shape.size()));
  }
  return absl::OkStatus();
}

template <typename T>
T* Data(const TensorView& x) {
  return static_cast<T*>(x.data);
}
inline float* F(const TensorView& x) { return Data<float>(x); }
inline const int32_t* I(const TensorView& x) { return Data<const int32_t>(x); }

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_OPERANDS_H_
