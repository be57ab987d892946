// The CPU compute's checks of its operands: on the cpu, of the expected dtype, size and rank,
// contiguous and allocated; each failure names the kernel and the operand.
#ifndef TITAN_CORE_TENSOR_INTERNAL_OPERANDS_H_
#define TITAN_CORE_TENSOR_INTERNAL_OPERANDS_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan::internal {

inline std::string DeviceName(const Device& device) {
  return absl::StrCat(device.type == DeviceType::kCpu ? "cpu" : "cuda", ":", device.index);
}

// Every operand must be a contiguous host tensor of the expected dtype, with `numel` elements
// when that is known (-1: any).
inline absl::Status Expect(const char* kernel, const char* operand, const TensorView& x,
                           DType dtype, int64_t numel = -1) {
  if (x.device.type != DeviceType::kCpu) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": operand '", operand, "' is on ",
                                                   DeviceName(x.device),
                                                   ", but this compute runs on cpu:0"));
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

}  // namespace titan::internal

#endif  // TITAN_CORE_TENSOR_INTERNAL_OPERANDS_H_
