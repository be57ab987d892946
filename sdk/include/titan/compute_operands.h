// The checks a compute backend (titan/compute.h) makes of its operands before it launches a
// kernel, shared by every backend so that each names a wrong operand the same way: on the
// backend's device, of the expected dtype, size and rank, contiguous and allocated; attention's
// spec consistent with its q, k and v. Each failure names the kernel and the operand.
#ifndef TITAN_COMPUTE_OPERANDS_H_
#define TITAN_COMPUTE_OPERANDS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

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

// Gemm's a, b (both f32 or both bf16) and c (f32), 2-D, with op(a) . op(b) chaining into c.
inline absl::Status CheckGemmOperands(const TensorView& a, bool transpose_a, const TensorView& b,
                                      bool transpose_b, const TensorView& c, DeviceType device) {
  constexpr const char* kKernel = "Gemm";
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "a", a, 2));
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "b", b, 2));
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "c", c, 2));
  if (a.dtype != DType::kF32 && a.dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gemm: operand 'a' expected f32 or bf16, found ", DTypeName(a.dtype)));
  }
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "a", a, device, a.dtype));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "b", b, device, a.dtype));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "c", c, device, DType::kF32));
  const int64_t m = a.shape[transpose_a ? 1 : 0], k = a.shape[transpose_a ? 0 : 1];
  const int64_t kb = b.shape[transpose_b ? 1 : 0], n = b.shape[transpose_b ? 0 : 1];
  if (k != kb || c.shape[0] != m || c.shape[1] != n) {
    return absl::InvalidArgumentError(absl::StrCat("Gemm: shapes do not chain: op(a) [", m, ", ", k,
                                                   "] . op(b) [", kb, ", ", n, "] into c [",
                                                   c.shape[0], ", ", c.shape[1], "]"));
  }
  return absl::OkStatus();
}

// A 2-D float8 operand (e4m3fn or e5m2).
inline absl::Status ExpectFloat8(const char* kernel, const char* operand, const TensorView& x,
                                 DeviceType device) {
  if (x.dtype != DType::kF8E4M3 && x.dtype != DType::kF8E5M2) {
    return absl::InvalidArgumentError(absl::StrCat(
        kernel, ": operand '", operand, "' expected f8e4m3 or f8e5m2, found ", DTypeName(x.dtype)));
  }
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, operand, x, 2));
  return ExpectOperand(kernel, operand, x, device, x.dtype);
}

// Float8Gemm's a [m, k], b [n, k], their inverse scales ([1] or one per row) and c [m, n] f32.
inline absl::Status CheckFloat8GemmOperands(const TensorView& a, const TensorView& inverse_scale_a,
                                            const TensorView& b, const TensorView& inverse_scale_b,
                                            const TensorView& c, DeviceType device) {
  constexpr const char* kKernel = "Float8Gemm";
  TITAN_RETURN_IF_ERROR(ExpectFloat8(kKernel, "a", a, device));
  TITAN_RETURN_IF_ERROR(ExpectFloat8(kKernel, "b", b, device));
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "c", c, 2));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "c", c, device, DType::kF32));
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[0];
  if (b.shape[1] != k || c.shape[0] != m || c.shape[1] != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(kKernel, ": shapes do not chain: a [", m, ", ", k, "] . b^T (b [", n, ", ",
                     b.shape[1], "]) into c [", c.shape[0], ", ", c.shape[1], "]"));
  }
  const std::pair<const char*, const TensorView*> scales[] = {
      {"inverse_scale_a", &inverse_scale_a}, {"inverse_scale_b", &inverse_scale_b}};
  for (const auto& [name, x] : scales) {
    const int64_t rows = x == &inverse_scale_a ? m : n;
    TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, name, *x, device, DType::kF32));
    if (x->numel() != 1 && x->numel() != rows) {
      return absl::InvalidArgumentError(absl::StrCat(kKernel, ": operand '", name,
                                                     "' expected 1 (per tensor) or ", rows,
                                                     " (per row) scales, found ", x->numel()));
    }
  }
  return absl::OkStatus();
}

// Float8Quantize's x [rows, columns] (f32 or bf16), out (float8, x's shape or its transpose)
// and inverse_scales (f32, [1] or one per row of out).
inline absl::Status CheckFloat8QuantizeOperands(const TensorView& x, const Float8Scaling& scaling,
                                                const TensorView& out,
                                                const TensorView& inverse_scales,
                                                DeviceType device) {
  constexpr const char* kKernel = "Float8Quantize";
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "x", x, 2));
  if (x.dtype != DType::kF32 && x.dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat(kKernel, ": operand 'x' expected f32 or bf16, found ", DTypeName(x.dtype)));
  }
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "x", x, device, x.dtype));
  TITAN_RETURN_IF_ERROR(ExpectFloat8(kKernel, "out", out, device));
  const int64_t out_rows = x.shape[scaling.transpose ? 1 : 0];
  const int64_t out_columns = x.shape[scaling.transpose ? 0 : 1];
  if (out.shape[0] != out_rows || out.shape[1] != out_columns) {
    return absl::InvalidArgumentError(
        absl::StrCat(kKernel, ": operand 'out' expected [", out_rows, ", ", out_columns, "]",
                     scaling.transpose ? " (x transposed)" : "", ", found [", out.shape[0], ", ",
                     out.shape[1], "]"));
  }
  const bool per_row = scaling.granularity == Float8Granularity::kRow;
  if (scaling.amax.data != nullptr) {
    if (per_row) {
      return absl::InvalidArgumentError(
          absl::StrCat(kKernel, ": a given amax needs tensorwise scaling, not rowwise"));
    }
    TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "amax", scaling.amax, device, DType::kF32, 1));
  }
  return ExpectOperand(kKernel, "inverse_scales", inverse_scales, device, DType::kF32,
                       per_row ? out_rows : 1);
}

// Transpose's src [rows, columns] and dst [columns, rows], of one dtype.
inline absl::Status CheckTransposeOperands(const TensorView& src, const TensorView& dst,
                                           DeviceType device) {
  constexpr const char* kKernel = "Transpose";
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "src", src, 2));
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "dst", dst, 2));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "src", src, device, src.dtype));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "dst", dst, device, src.dtype));
  if (dst.shape[0] != src.shape[1] || dst.shape[1] != src.shape[0]) {
    return absl::InvalidArgumentError(absl::StrCat(kKernel, ": operand 'dst' expected [",
                                                   src.shape[1], ", ", src.shape[0], "], found [",
                                                   dst.shape[0], ", ", dst.shape[1], "]"));
  }
  return absl::OkStatus();
}

// AbsMax's tensors (f32 or bf16) and out (f32, one per tensor).
inline absl::Status CheckAbsMaxOperands(std::span<const TensorView> tensors, const TensorView& out,
                                        DeviceType device) {
  constexpr const char* kKernel = "AbsMax";
  for (const TensorView& x : tensors) {
    if (x.dtype != DType::kF32 && x.dtype != DType::kBF16) {
      return absl::InvalidArgumentError(absl::StrCat(
          kKernel, ": operand 'tensors' expected f32 or bf16, found ", DTypeName(x.dtype)));
    }
    TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "tensors", x, device, x.dtype));
  }
  return ExpectOperand(kKernel, "out", out, device, DType::kF32,
                       static_cast<int64_t>(tensors.size()));
}

}  // namespace titan

#endif  // TITAN_COMPUTE_OPERANDS_H_
