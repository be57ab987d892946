// The checks a compute backend (titan/compute.h) makes of its operands before it launches a
// kernel, shared by every backend so that each names a wrong operand the same way: on the
// backend's device, of the expected dtype, size and rank, contiguous and allocated; attention's
// spec consistent with its q, k and v. Each failure names the kernel and the operand.
#ifndef TITAN_COMPUTE_OPERANDS_H_
#define TITAN_COMPUTE_OPERANDS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "titan/compute.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan {

inline std::string DeviceName(const Device& device) {
  return absl::StrCat(device.type == DeviceType::kCpu ? "cpu" : "cuda", ":", device.index);
}

// `numel` -1: any size.
inline absl::Status ExpectOperand(const char* kernel, const char* operand, const TensorView& x,
                                  DeviceType device, DType dtype, int64_t numel = -1) {
  if (x.device.type != device) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": operand '", operand, "' is on ", DeviceName(x.device),
                     ", but this compute runs on ", DeviceName(Device{device, 0})));
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

// The spec's sizes, and q, k and v (f32) of the sizes it gives.
inline absl::Status CheckAttentionOperands(const char* kernel, const AttentionSpec& s,
                                           const TensorView& q, const TensorView& k,
                                           const TensorView& v, DeviceType device) {
  if (s.batch < 0 || s.seq_len < 0 || s.kv_len < 0 || s.head_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel,
                     ": expected non-negative batch, seq_len and kv_len and a positive "
                     "head_dim, found ",
                     s.batch, ", ", s.seq_len, ", ", s.kv_len, ", ", s.head_dim));
  }
  if (s.heads <= 0 || s.kv_heads <= 0 || s.heads % s.kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kernel, ": heads ", s.heads, " must be a positive multiple of kv_heads ", s.kv_heads));
  }
  const int64_t queries = s.batch * s.seq_len, keys = s.batch * s.kv_len;
  TITAN_RETURN_IF_ERROR(
      ExpectOperand(kernel, "q", q, device, DType::kF32, queries * s.heads * s.head_dim));
  TITAN_RETURN_IF_ERROR(
      ExpectOperand(kernel, "k", k, device, DType::kF32, keys * s.kv_heads * s.head_dim));
  return ExpectOperand(kernel, "v", v, device, DType::kF32, keys * s.kv_heads * s.head_dim);
}

}  // namespace titan

#endif  // TITAN_COMPUTE_OPERANDS_H_
