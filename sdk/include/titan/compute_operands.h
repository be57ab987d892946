// The checks of a kernel's operands that the kernel table (titan/compute_kernels.inc) names and
// the compute interface (titan/compute.h) runs before every backend's implementation, so that a
// wrong operand reads the same on every backend: on the compute's device, of the expected dtype,
// size and rank, contiguous and allocated; attention's spec consistent with its q, k and v. Each
// failure names the kernel and the operand. A backend may use the pieces (ExpectOperand, ...)
// for limits of its own.
#ifndef TITAN_COMPUTE_OPERANDS_H_
#define TITAN_COMPUTE_OPERANDS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "titan/compute_types.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan {

inline std::string DeviceName(const Device& device) {
  return absl::StrCat(device.type == DeviceType::kCpu ? "cpu" : "cuda", ":", device.index);
}

// `numel` unset: any size. A size computed from bad inputs may be negative; it matches nothing.
inline absl::Status ExpectOperand(const char* kernel, const char* operand, const TensorView& x,
                                  DeviceType device, DType dtype,
                                  std::optional<int64_t> numel = std::nullopt) {
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
  for (int64_t extent : x.shape) {
    if (extent < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(kernel, ": operand '", operand, "' has a negative extent ", extent));
    }
  }
  if (numel.has_value() && x.numel() != *numel) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": operand '", operand, "' expected ",
                                                   *numel, " elements, found ", x.numel()));
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

// One operand of a list that shares a dtype and a size.
struct NamedOperand {
  const char* name;
  const TensorView& x;
};

// `numel` unset: any size.
inline absl::Status ExpectOperands(const char* kernel, std::initializer_list<NamedOperand> operands,
                                   DeviceType device, DType dtype,
                                   std::optional<int64_t> numel = std::nullopt) {
  for (const NamedOperand& operand : operands) {
    TITAN_RETURN_IF_ERROR(ExpectOperand(kernel, operand.name, operand.x, device, dtype, numel));
  }
  return absl::OkStatus();
}

// An activation operand: f32 or bf16. A kernel reads it into f32 and rounds what it writes to it
// once, to nearest even; its arithmetic is the f32 kernel's whatever the dtypes.
inline absl::Status ExpectActivation(const char* kernel, const char* operand, const TensorView& x,
                                     DeviceType device,
                                     std::optional<int64_t> numel = std::nullopt) {
  if (x.dtype != DType::kF32 && x.dtype != DType::kBF16) {
    return absl::InvalidArgumentError(absl::StrCat(
        kernel, ": operand '", operand, "' expected f32 or bf16, found ", DTypeName(x.dtype)));
  }
  return ExpectOperand(kernel, operand, x, device, x.dtype, numel);
}

// Activation operands, each f32 or bf16 of its own, of one size (`numel` unset: any).
inline absl::Status ExpectActivations(const char* kernel,
                                      std::initializer_list<NamedOperand> operands,
                                      DeviceType device,
                                      std::optional<int64_t> numel = std::nullopt) {
  for (const NamedOperand& operand : operands) {
    TITAN_RETURN_IF_ERROR(ExpectActivation(kernel, operand.name, operand.x, device, numel));
  }
  return absl::OkStatus();
}

// `second` of `first`'s dtype.
inline absl::Status ExpectSameDType(const char* kernel, NamedOperand first, NamedOperand second) {
  if (first.x.dtype != second.x.dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": operand '", second.name, "' expected ", DTypeName(first.x.dtype),
                     " as '", first.name, "', found ", DTypeName(second.x.dtype)));
  }
  return absl::OkStatus();
}

// The spec's sizes: non-negative batch and lengths, a positive head_dim, heads grouped over
// kv_heads.
inline absl::Status CheckAttentionSpec(const char* kernel, const AttentionSpec& s) {
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
  return absl::OkStatus();
}

// The spec, and q, k and v of the sizes it gives: activations (f32 or bf16), k and v of q's dtype.
inline absl::Status CheckAttentionOperands(const char* kernel, const AttentionSpec& s,
                                           const TensorView& q, const TensorView& k,
                                           const TensorView& v, DeviceType device) {
  TITAN_RETURN_IF_ERROR(CheckAttentionSpec(kernel, s));
  const int64_t queries = s.batch * s.seq_len, keys = s.batch * s.kv_len;
  TITAN_RETURN_IF_ERROR(ExpectActivation(kernel, "q", q, device, queries * s.heads * s.head_dim));
  TITAN_RETURN_IF_ERROR(
      ExpectOperand(kernel, "k", k, device, q.dtype, keys * s.kv_heads * s.head_dim));
  return ExpectOperand(kernel, "v", v, device, q.dtype, keys * s.kv_heads * s.head_dim);
}

// Gemm's operands under `kernel`'s name: a and b of `dtype`, c of `c_dtype`, 2-D, with
// op(a) . op(b) chaining into c.
inline absl::Status CheckGemmShapes(const char* kernel, const TensorView& a, bool transpose_a,
                                    const TensorView& b, bool transpose_b, const TensorView& c,
                                    DeviceType device, DType dtype, DType c_dtype = DType::kF32) {
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, "a", a, 2));
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, "b", b, 2));
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, "c", c, 2));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kernel, "a", a, device, dtype));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kernel, "b", b, device, dtype));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kernel, "c", c, device, c_dtype));
  const int64_t m = a.shape[transpose_a ? 1 : 0], k = a.shape[transpose_a ? 0 : 1];
  const int64_t kb = b.shape[transpose_b ? 1 : 0], n = b.shape[transpose_b ? 0 : 1];
  if (k != kb || c.shape[0] != m || c.shape[1] != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": shapes do not chain: op(a) [", m, ", ", k, "] . op(b) [", kb, ", ",
                     n, "] into c [", c.shape[0], ", ", c.shape[1], "]"));
  }
  return absl::OkStatus();
}

// a f32 or bf16: the dtype Gemm and GroupedGemm take.
inline absl::Status ExpectGemmDType(const char* kernel, const TensorView& a) {
  if (a.dtype != DType::kF32 && a.dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": operand 'a' expected f32 or bf16, found ", DTypeName(a.dtype)));
  }
  return absl::OkStatus();
}

// Gemm's a and b (both f32 or both bf16) and c (f32, or bf16 when a and b are).
inline absl::Status CheckGemmOperands(const TensorView& a, bool transpose_a, const TensorView& b,
                                      bool transpose_b, const TensorView& c, DeviceType device) {
  TITAN_RETURN_IF_ERROR(ExpectGemmDType("Gemm", a));
  if (c.dtype != DType::kF32 && !(c.dtype == DType::kBF16 && a.dtype == DType::kBF16)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gemm: operand 'c' expected f32 (or bf16 with bf16 a and b), found ",
                     DTypeName(c.dtype), " with ", DTypeName(a.dtype), " a"));
  }
  return CheckGemmShapes("Gemm", a, transpose_a, b, transpose_b, c, device, a.dtype, c.dtype);
}

// GroupedGemm's groups: at least one, each Gemm's operands with the first group's dtype and none
// empty, and no two writing overlapping memory (a backend may run the groups at once).
inline absl::Status CheckGroupedGemmOperands(std::span<const GemmGroup> groups, bool transpose_a,
                                             bool transpose_b, DeviceType device) {
  if (groups.empty()) return absl::InvalidArgumentError("GroupedGemm: no groups");
  TITAN_RETURN_IF_ERROR(ExpectGemmDType("GroupedGemm, group 0", groups[0].a));
  struct Span {
    uintptr_t begin, end;
    size_t group;
  };
  std::vector<Span> outputs;
  for (size_t g = 0; g < groups.size(); ++g) {
    const GemmGroup& group = groups[g];
    const std::string kernel = absl::StrCat("GroupedGemm, group ", g);
    TITAN_RETURN_IF_ERROR(CheckGemmShapes(kernel.c_str(), group.a, transpose_a, group.b,
                                          transpose_b, group.c, device, groups[0].a.dtype));
    if (group.a.numel() == 0 || group.b.numel() == 0 || group.c.numel() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          kernel, ": an empty problem (a [", group.a.shape[0], ", ", group.a.shape[1], "], b [",
          group.b.shape[0], ", ", group.b.shape[1], "]); leave it out of the call"));
    }
    const auto begin = reinterpret_cast<uintptr_t>(group.c.data);
    outputs.push_back({begin, begin + group.c.nbytes(), g});
  }
  std::sort(outputs.begin(), outputs.end(),
            [](const Span& x, const Span& y) { return x.begin < y.begin; });
  for (size_t i = 1; i < outputs.size(); ++i) {
    if (outputs[i].begin < outputs[i - 1].end) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GroupedGemm: groups ", std::min(outputs[i - 1].group, outputs[i].group), " and ",
          std::max(outputs[i - 1].group, outputs[i].group),
          " write overlapping memory of c; the groups may run at once, so split them over calls"));
    }
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

// The high-precision x [rows, columns] (f32 or bf16) of Float8Quantize and Float8Amax.
inline absl::Status ExpectFloat8Source(const char* kernel, const TensorView& x, DeviceType device) {
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, "x", x, 2));
  if (x.dtype != DType::kF32 && x.dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": operand 'x' expected f32 or bf16, found ", DTypeName(x.dtype)));
  }
  return ExpectOperand(kernel, "x", x, device, x.dtype);
}

// Float8Quantize's x [rows, columns] (f32 or bf16), out (float8, x's shape or its transpose)
// and inverse_scales (f32, [1] or one per row of out).
inline absl::Status CheckFloat8QuantizeOperands(const TensorView& x, const Float8Scaling& scaling,
                                                const TensorView& out,
                                                const TensorView& inverse_scales,
                                                DeviceType device) {
  constexpr const char* kKernel = "Float8Quantize";
  TITAN_RETURN_IF_ERROR(ExpectFloat8Source(kKernel, x, device));
  TITAN_RETURN_IF_ERROR(ExpectFloat8(kKernel, "out", out, device));
  const int64_t out_rows = x.shape[scaling.transpose ? 1 : 0];
  const int64_t out_columns = x.shape[scaling.transpose ? 0 : 1];
  if (out.shape[0] != out_rows || out.shape[1] != out_columns) {
    return absl::InvalidArgumentError(
        absl::StrCat(kKernel, ": operand 'out' expected [", out_rows, ", ", out_columns, "]",
                     scaling.transpose ? " (x transposed)" : "", ", found [", out.shape[0], ", ",
                     out.shape[1], "]"));
  }
  const int64_t scales = scaling.granularity == Float8Granularity::kRow ? out_rows : 1;
  if (scaling.amax.data != nullptr) {
    TITAN_RETURN_IF_ERROR(
        ExpectOperand(kKernel, "amax", scaling.amax, device, DType::kF32, scales));
  }
  return ExpectOperand(kKernel, "inverse_scales", inverse_scales, device, DType::kF32, scales);
}

// Float8Amax's x (f32 or bf16, 2-D) and amax (f32, [1] or one per row of x as scaling lays it).
inline absl::Status CheckFloat8AmaxOperands(const TensorView& x, const Float8Scaling& scaling,
                                            const TensorView& amax, DeviceType device) {
  constexpr const char* kKernel = "Float8Amax";
  TITAN_RETURN_IF_ERROR(ExpectFloat8Source(kKernel, x, device));
  const int64_t out_rows = x.shape[scaling.transpose ? 1 : 0];
  return ExpectOperand(kKernel, "amax", amax, device, DType::kF32,
                       scaling.granularity == Float8Granularity::kRow ? out_rows : 1);
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

// AttentionForward's spec, q, k and v, out (q's size and dtype) and lse [batch, heads, seq_len]
// (f32).
inline absl::Status CheckAttentionForwardOperands(const AttentionSpec& s, const TensorView& q,
                                                  const TensorView& k, const TensorView& v,
                                                  const TensorView& out, const TensorView& lse,
                                                  DeviceType device) {
  constexpr const char* kKernel = "AttentionForward";
  TITAN_RETURN_IF_ERROR(CheckAttentionOperands(kKernel, s, q, k, v, device));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "out", out, device, q.dtype, q.numel()));
  return ExpectOperand(kKernel, "lse", lse, device, DType::kF32, s.batch * s.heads * s.seq_len);
}

// AttentionBackward's spec, q, k and v, the gradients and forward results of their sizes and
// q's dtype, and lse [batch, heads, seq_len] (f32).
inline absl::Status CheckAttentionBackwardOperands(const AttentionSpec& s, const TensorView& dout,
                                                   const TensorView& q, const TensorView& k,
                                                   const TensorView& v, const TensorView& out,
                                                   const TensorView& lse, const TensorView& dq,
                                                   const TensorView& dk, const TensorView& dv,
                                                   DeviceType device) {
  constexpr const char* kKernel = "AttentionBackward";
  TITAN_RETURN_IF_ERROR(CheckAttentionOperands(kKernel, s, q, k, v, device));
  TITAN_RETURN_IF_ERROR(ExpectOperands(kKernel, {{"dout", dout}, {"out", out}, {"dq", dq}}, device,
                                       q.dtype, q.numel()));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "dk", dk, device, q.dtype, k.numel()));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "dv", dv, device, q.dtype, v.numel()));
  return ExpectOperand(kKernel, "lse", lse, device, DType::kF32, s.batch * s.heads * s.seq_len);
}

// AttentionMerge's spec, outputs [batch, seq_len, heads, head_dim] (activations, out of
// part_out's dtype) and log-sum-exps (one per output row, f32).
inline absl::Status CheckAttentionMergeOperands(const AttentionSpec& s, const TensorView& part_out,
                                                const TensorView& part_lse, const TensorView& out,
                                                const TensorView& lse, DeviceType device) {
  constexpr const char* kKernel = "AttentionMerge";
  TITAN_RETURN_IF_ERROR(CheckAttentionSpec(kKernel, s));
  const int64_t rows = s.batch * s.seq_len * s.heads;
  TITAN_RETURN_IF_ERROR(ExpectActivation(kKernel, "part_out", part_out, device, rows * s.head_dim));
  TITAN_RETURN_IF_ERROR(
      ExpectOperand(kKernel, "out", out, device, part_out.dtype, rows * s.head_dim));
  return ExpectOperands(kKernel, {{"part_lse", part_lse}, {"lse", lse}}, device, DType::kF32, rows);
}

// RMSNorm's inp [n, c] with `like_inp` of its size (activations: each f32 or bf16), and
// `like_weight` [c] and rstd [n] (f32).
inline absl::Status ExpectRmsNormOperands(const char* kernel, const TensorView& inp,
                                          std::initializer_list<NamedOperand> like_inp,
                                          std::initializer_list<NamedOperand> like_weight,
                                          const TensorView& rstd, DeviceType device) {
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, "inp", inp, 2));
  const int64_t n = inp.shape[0], c = inp.shape[1];
  TITAN_RETURN_IF_ERROR(ExpectActivation(kernel, "inp", inp, device));
  TITAN_RETURN_IF_ERROR(ExpectActivations(kernel, like_inp, device, n * c));
  TITAN_RETURN_IF_ERROR(ExpectOperands(kernel, like_weight, device, DType::kF32, c));
  return ExpectOperand(kernel, "rstd", rstd, device, DType::kF32, n);
}

// RmsNormForward's inp and out [n, c], weight [c] and rstd [n].
inline absl::Status CheckRmsNormForwardOperands(const TensorView& inp, const TensorView& weight,
                                                const TensorView& out, const TensorView& rstd,
                                                DeviceType device) {
  return ExpectRmsNormOperands("RmsNormForward", inp, {{"out", out}}, {{"weight", weight}}, rstd,
                               device);
}

// RmsNormBackward's inp, dout and dinp [n, c], weight and dweight [c] and rstd [n].
inline absl::Status CheckRmsNormBackwardOperands(const TensorView& dout, const TensorView& inp,
                                                 const TensorView& weight, const TensorView& rstd,
                                                 const TensorView& dinp, const TensorView& dweight,
                                                 DeviceType device) {
  return ExpectRmsNormOperands("RmsNormBackward", inp, {{"dout", dout}, {"dinp", dinp}},
                               {{"weight", weight}, {"dweight", dweight}}, rstd, device);
}

// RopeTable's cos and sin [seq_len, head_dim / 2], f32.
inline absl::Status CheckRopeTableOperands(const RopeSpec& spec, const TensorView& cos,
                                           const TensorView& sin, DeviceType device) {
  constexpr const char* kKernel = "RopeTable";
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "cos", cos, 2));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "cos", cos, device, DType::kF32));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "sin", sin, device, DType::kF32, cos.numel()));
  if (cos.shape[1] * 2 != spec.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(kKernel, ": expected [seq_len, ",
                                                   spec.head_dim / 2, "] tables, found [",
                                                   cos.shape[0], ", ", cos.shape[1], "]"));
  }
  return absl::OkStatus();
}

// RopeForward's or RopeBackward's x [b, t, heads, head_dim] (f32 or bf16) against tables
// [t, head_dim / 2] (f32).
inline absl::Status CheckRopeOperands(const char* kernel, const TensorView& cos,
                                      const TensorView& sin, const TensorView& x,
                                      DeviceType device) {
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, "x", x, 4));
  TITAN_RETURN_IF_ERROR(ExpectActivation(kernel, "x", x, device));
  const int64_t table = x.shape[1] * (x.shape[3] / 2);
  return ExpectOperands(kernel, {{"cos", cos}, {"sin", sin}}, device, DType::kF32, table);
}

// SwiGluForward's a, with b and out of its size: activations, b of a's dtype.
inline absl::Status CheckSwiGluForwardOperands(const TensorView& a, const TensorView& b,
                                               const TensorView& out, DeviceType device) {
  constexpr const char* kKernel = "SwiGluForward";
  TITAN_RETURN_IF_ERROR(
      ExpectActivations(kKernel, {{"a", a}, {"b", b}, {"out", out}}, device, a.numel()));
  return ExpectSameDType(kKernel, {"a", a}, {"b", b});
}

// SwiGluBackward's operands of a's size: activations, b of a's dtype, db of da's.
inline absl::Status CheckSwiGluBackwardOperands(const TensorView& dout, const TensorView& a,
                                                const TensorView& b, const TensorView& da,
                                                const TensorView& db, DeviceType device) {
  constexpr const char* kKernel = "SwiGluBackward";
  TITAN_RETURN_IF_ERROR(ExpectActivations(
      kKernel, {{"dout", dout}, {"a", a}, {"b", b}, {"da", da}, {"db", db}}, device, a.numel()));
  TITAN_RETURN_IF_ERROR(ExpectSameDType(kKernel, {"a", a}, {"b", b}));
  return ExpectSameDType(kKernel, {"da", da}, {"db", db});
}

// n tokens (i32) against a table [rows, c] (f32) and n of its rows [n, c] (an activation: f32 or
// bf16): the forward's table and out, the backward's dtable and dout.
inline absl::Status CheckEmbeddingOperands(const char* kernel, const TensorView& tokens,
                                           NamedOperand table, NamedOperand rows,
                                           DeviceType device) {
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, table.name, table.x, 2));
  const int64_t n = tokens.numel(), c = table.x.shape[1];
  TITAN_RETURN_IF_ERROR(ExpectOperand(kernel, "tokens", tokens, device, DType::kI32));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kernel, table.name, table.x, device, DType::kF32));
  return ExpectActivation(kernel, rows.name, rows.x, device, n * c);
}

inline absl::Status CheckEmbeddingForwardOperands(const TensorView& tokens, const TensorView& table,
                                                  const TensorView& out, DeviceType device) {
  return CheckEmbeddingOperands("EmbeddingForward", tokens, {"table", table}, {"out", out}, device);
}

inline absl::Status CheckEmbeddingBackwardOperands(const TensorView& tokens, const TensorView& dout,
                                                   const TensorView& dtable, DeviceType device) {
  return CheckEmbeddingOperands("EmbeddingBackward", tokens, {"dtable", dtable}, {"dout", dout},
                                device);
}

// Cross-entropy's logits [n, vocabulary], an activation (f32 or bf16).
inline absl::Status ExpectLogits(const char* kernel, const TensorView& logits, DeviceType device) {
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, "logits", logits, 2));
  return ExpectActivation(kernel, "logits", logits, device);
}

// Logits [n, vocabulary] (f32 or bf16) and their targets [n] (i32).
inline absl::Status ExpectLogitsAndTargets(const char* kernel, const TensorView& logits,
                                           const TensorView& targets, DeviceType device) {
  TITAN_RETURN_IF_ERROR(ExpectLogits(kernel, logits, device));
  return ExpectOperand(kernel, "targets", targets, device, DType::kI32, logits.shape[0]);
}

// CrossEntropyRowMax's logits [n, vocabulary] and max [n], f32.
inline absl::Status CheckCrossEntropyRowMaxOperands(const TensorView& logits, const TensorView& max,
                                                    DeviceType device) {
  constexpr const char* kKernel = "CrossEntropyRowMax";
  TITAN_RETURN_IF_ERROR(ExpectLogits(kKernel, logits, device));
  return ExpectOperand(kKernel, "max", max, device, DType::kF32, logits.shape[0]);
}

// CrossEntropySumExp's logits [n, vocabulary], max and sum [n], f32.
inline absl::Status CheckCrossEntropySumExpOperands(const TensorView& logits, const TensorView& max,
                                                    const TensorView& sum, DeviceType device) {
  constexpr const char* kKernel = "CrossEntropySumExp";
  TITAN_RETURN_IF_ERROR(ExpectLogits(kKernel, logits, device));
  return ExpectOperands(kKernel, {{"max", max}, {"sum", sum}}, device, DType::kF32,
                        logits.shape[0]);
}

// CrossEntropyTargetLogit's logits [n, vocabulary], targets [n] (i32) and target [n] (f32).
inline absl::Status CheckCrossEntropyTargetLogitOperands(const TensorView& logits,
                                                         const TensorView& targets,
                                                         const TensorView& target,
                                                         DeviceType device) {
  constexpr const char* kKernel = "CrossEntropyTargetLogit";
  TITAN_RETURN_IF_ERROR(ExpectLogitsAndTargets(kKernel, logits, targets, device));
  return ExpectOperand(kKernel, "target", target, device, DType::kF32, logits.shape[0]);
}

// CrossEntropyFinish's targets [n] (i32), max, target and sum_to_lse [n] and loss [1] (f32).
inline absl::Status CheckCrossEntropyFinishOperands(const TensorView& max, const TensorView& target,
                                                    const TensorView& targets,
                                                    const TensorView& sum_to_lse,
                                                    const TensorView& loss, DeviceType device) {
  constexpr const char* kKernel = "CrossEntropyFinish";
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "targets", targets, device, DType::kI32));
  TITAN_RETURN_IF_ERROR(
      ExpectOperands(kKernel, {{"max", max}, {"target", target}, {"sum_to_lse", sum_to_lse}},
                     device, DType::kF32, targets.numel()));
  return ExpectOperand(kKernel, "loss", loss, device, DType::kF32, 1);
}

// CrossEntropyBackward's logits [n, vocabulary], lse [n] (f32), targets [n] (i32) and dlogits of
// logits' size (f32 or bf16; logits' dtype where it is the logits' memory).
inline absl::Status CheckCrossEntropyBackwardOperands(const TensorView& logits,
                                                      const TensorView& lse,
                                                      const TensorView& targets,
                                                      const TensorView& dlogits,
                                                      DeviceType device) {
  constexpr const char* kKernel = "CrossEntropyBackward";
  TITAN_RETURN_IF_ERROR(ExpectLogitsAndTargets(kKernel, logits, targets, device));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "lse", lse, device, DType::kF32, logits.shape[0]));
  TITAN_RETURN_IF_ERROR(ExpectActivation(kKernel, "dlogits", dlogits, device, logits.numel()));
  if (dlogits.data == logits.data) {
    return ExpectSameDType(kKernel, {"logits", logits}, {"dlogits", dlogits});
  }
  return absl::OkStatus();
}

// A routing's top_k, groups and groups_chosen against the router's E experts.
inline absl::Status CheckMoeRouting(const char* kernel, const MoeRouting& r, int64_t experts) {
  if (r.score != MoeRouting::Score::kSoftmax && r.score != MoeRouting::Score::kSigmoid) {
    return absl::InvalidArgumentError(absl::StrCat(
        kernel, ": routing.score ", static_cast<int>(r.score), " is neither softmax nor sigmoid"));
  }
  if (r.top_k < 1 || r.top_k > experts) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": routing.top_k ", r.top_k,
                                                   " must be in [1, ", experts, "] (the experts)"));
  }
  if (r.groups < 1 || experts % r.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": routing.groups ", r.groups,
                                                   " must divide the ", experts, " experts"));
  }
  if (r.groups_chosen < 1 || r.groups_chosen > r.groups) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": routing.groups_chosen ",
                                                   r.groups_chosen, " must be in [1, ", r.groups,
                                                   "] (the groups)"));
  }
  const int64_t eligible = r.groups_chosen * (experts / r.groups);
  if (r.top_k > eligible) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": routing.top_k ", r.top_k,
                                                   " exceeds the ", eligible, " experts of the ",
                                                   r.groups_chosen, " groups chosen"));
  }
  return absl::OkStatus();
}

// Router logits [n, E], f32.
inline absl::Status ExpectRouterLogits(const char* kernel, const TensorView& logits,
                                       DeviceType device) {
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, "logits", logits, 2));
  return ExpectOperand(kernel, "logits", logits, device, DType::kF32);
}

// The MoE kernels' k = m / n experts per token: `operand` holds the m assignments of n tokens.
inline absl::Status ExpectWholeAssignmentsPerToken(const char* kernel, const char* operand,
                                                   int64_t assignments, int64_t tokens) {
  if (tokens == 0 ? assignments == 0 : assignments % tokens == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(kernel, ": operand '", operand, "' expected a multiple of ", tokens,
                   " assignments (k per token), found ", assignments));
}

// MoeRoute's logits [n, E], bias [E] (or no data: none) and weights [n, k] (f32), experts
// [n, k] (i32), and a routing that fits E experts.
inline absl::Status CheckMoeRouteOperands(const TensorView& logits, const TensorView& bias,
                                          const MoeRouting& routing, const TensorView& experts,
                                          const TensorView& weights, DeviceType device) {
  constexpr const char* kKernel = "MoeRoute";
  TITAN_RETURN_IF_ERROR(ExpectRouterLogits(kKernel, logits, device));
  const int64_t n = logits.shape[0], e = logits.shape[1];
  if (bias.data != nullptr) {
    TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "bias", bias, device, DType::kF32, e));
  }
  TITAN_RETURN_IF_ERROR(CheckMoeRouting(kKernel, routing, e));
  TITAN_RETURN_IF_ERROR(
      ExpectOperand(kKernel, "experts", experts, device, DType::kI32, n * routing.top_k));
  return ExpectOperand(kKernel, "weights", weights, device, DType::kF32, n * routing.top_k);
}

// MoeRouteBackward's logits and d_logits [n, E] and d_weights [n, k] (f32), experts [n, k]
// (i32), and a routing that fits E experts.
inline absl::Status CheckMoeRouteBackwardOperands(const TensorView& logits,
                                                  const TensorView& experts,
                                                  const TensorView& d_weights,
                                                  const MoeRouting& routing,
                                                  const TensorView& d_logits, DeviceType device) {
  constexpr const char* kKernel = "MoeRouteBackward";
  TITAN_RETURN_IF_ERROR(ExpectRouterLogits(kKernel, logits, device));
  const int64_t n = logits.shape[0], e = logits.shape[1];
  TITAN_RETURN_IF_ERROR(CheckMoeRouting(kKernel, routing, e));
  TITAN_RETURN_IF_ERROR(
      ExpectOperand(kKernel, "experts", experts, device, DType::kI32, n * routing.top_k));
  TITAN_RETURN_IF_ERROR(
      ExpectOperand(kKernel, "d_weights", d_weights, device, DType::kF32, n * routing.top_k));
  return ExpectOperand(kKernel, "d_logits", d_logits, device, DType::kF32, n * e);
}

// MoePermute's experts (i32, m of them), counts (i32, one per expert, at least one) and slots
// (i32 [m]).
inline absl::Status CheckMoePermuteOperands(const TensorView& experts, const TensorView& counts,
                                            const TensorView& slots, DeviceType device) {
  constexpr const char* kKernel = "MoePermute";
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "experts", experts, device, DType::kI32));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "counts", counts, device, DType::kI32));
  if (counts.numel() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kKernel, ": operand 'counts' expected at least one expert, found 0"));
  }
  return ExpectOperand(kKernel, "slots", slots, device, DType::kI32, experts.numel());
}

// MoeDispatch's x [n, d] (f32 or bf16), slots [m] (i32, k per token) and out [m, d] of x's dtype.
inline absl::Status CheckMoeDispatchOperands(const TensorView& x, const TensorView& slots,
                                             const TensorView& out, DeviceType device) {
  constexpr const char* kKernel = "MoeDispatch";
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "x", x, 2));
  if (x.dtype != DType::kF32 && x.dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat(kKernel, ": operand 'x' expected f32 or bf16, found ", DTypeName(x.dtype)));
  }
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "x", x, device, x.dtype));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "slots", slots, device, DType::kI32));
  const int64_t m = slots.numel();
  TITAN_RETURN_IF_ERROR(ExpectWholeAssignmentsPerToken(kKernel, "slots", m, x.shape[0]));
  return ExpectOperand(kKernel, "out", out, device, x.dtype, m * x.shape[1]);
}

// MoeDispatchBackward's d_out [m, d] and dx [n, d] (f32) and slots [m] (i32, k per token).
inline absl::Status CheckMoeDispatchBackwardOperands(const TensorView& d_out,
                                                     const TensorView& slots, const TensorView& dx,
                                                     DeviceType device) {
  constexpr const char* kKernel = "MoeDispatchBackward";
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "d_out", d_out, 2));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "d_out", d_out, device, DType::kF32));
  const int64_t m = d_out.shape[0], d = d_out.shape[1];
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "slots", slots, device, DType::kI32, m));
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "dx", dx, 2));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "dx", dx, device, DType::kF32, dx.shape[0] * d));
  return ExpectWholeAssignmentsPerToken(kKernel, "slots", m, dx.shape[0]);
}

// MoeCombine's y [m, d], weights [m] and out [n, d] (f32) and slots [m] (i32, k per token).
inline absl::Status CheckMoeCombineOperands(const TensorView& y, const TensorView& weights,
                                            const TensorView& slots, const TensorView& out,
                                            DeviceType device) {
  constexpr const char* kKernel = "MoeCombine";
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "y", y, 2));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "y", y, device, DType::kF32));
  const int64_t m = y.shape[0], d = y.shape[1];
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "weights", weights, device, DType::kF32, m));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "slots", slots, device, DType::kI32, m));
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "out", out, 2));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "out", out, device, DType::kF32, out.shape[0] * d));
  return ExpectWholeAssignmentsPerToken(kKernel, "slots", m, out.shape[0]);
}

// MoeCombineBackward's d_out [n, d], y and d_y [m, d], weights and d_weights [m] (f32), and slots
// [m] (i32, k per token).
inline absl::Status CheckMoeCombineBackwardOperands(const TensorView& d_out, const TensorView& y,
                                                    const TensorView& weights,
                                                    const TensorView& slots, const TensorView& d_y,
                                                    const TensorView& d_weights,
                                                    DeviceType device) {
  constexpr const char* kKernel = "MoeCombineBackward";
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "d_out", d_out, 2));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "d_out", d_out, device, DType::kF32));
  const int64_t n = d_out.shape[0], d = d_out.shape[1];
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "y", y, 2));
  const int64_t m = y.shape[0];
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "y", y, device, DType::kF32, m * d));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "weights", weights, device, DType::kF32, m));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "slots", slots, device, DType::kI32, m));
  TITAN_RETURN_IF_ERROR(ExpectWholeAssignmentsPerToken(kKernel, "slots", m, n));
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "d_y", d_y, device, DType::kF32, m * d));
  return ExpectOperand(kKernel, "d_weights", d_weights, device, DType::kF32, m);
}

// AdamStep's params, grads, exp_avg and exp_avg_sq, f32 of params' size.
inline absl::Status CheckAdamStepOperands(const TensorView& params, const TensorView& grads,
                                          const TensorView& exp_avg, const TensorView& exp_avg_sq,
                                          DeviceType device) {
  return ExpectOperands(
      "AdamStep",
      {{"params", params}, {"grads", grads}, {"exp_avg", exp_avg}, {"exp_avg_sq", exp_avg_sq}},
      device, DType::kF32, params.numel());
}

// SgdStep's params, grads and, with momentum, momentum_buffer: f32 of params' size.
inline absl::Status CheckSgdStepOperands(const SgdUpdate& u, const TensorView& params,
                                         const TensorView& grads, const TensorView& momentum_buffer,
                                         DeviceType device) {
  constexpr const char* kKernel = "SgdStep";
  const int64_t n = params.numel();
  TITAN_RETURN_IF_ERROR(
      ExpectOperands(kKernel, {{"params", params}, {"grads", grads}}, device, DType::kF32, n));
  if (u.momentum == 0.0) return absl::OkStatus();
  return ExpectOperand(kKernel, "momentum_buffer", momentum_buffer, device, DType::kF32, n);
}

// SumOfSquares' tensors (f32), one weight each, and out [2] (f32).
inline absl::Status CheckSumOfSquaresOperands(std::span<const TensorView> tensors,
                                              std::span<const double> weights,
                                              const TensorView& out, DeviceType device) {
  constexpr const char* kKernel = "SumOfSquares";
  if (weights.size() != tensors.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kKernel, ": ", tensors.size(), " tensors need as many weights, found ", weights.size()));
  }
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "out", out, device, DType::kF32, 2));
  for (const TensorView& x : tensors) {
    TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "tensors", x, device, DType::kF32));
  }
  return absl::OkStatus();
}

// Cast's src and dst of one size, each f32, bf16 or f16.
inline absl::Status CheckCastOperands(const TensorView& src, const TensorView& dst,
                                      DeviceType device) {
  constexpr const char* kKernel = "Cast";
  const auto is_float = [](DType t) {
    return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16;
  };
  if (!is_float(src.dtype) || !is_float(dst.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(kKernel, ": expected f32, bf16 or f16, found ",
                                                   DTypeName(src.dtype), " -> ",
                                                   DTypeName(dst.dtype)));
  }
  TITAN_RETURN_IF_ERROR(ExpectOperand(kKernel, "src", src, device, src.dtype));
  return ExpectOperand(kKernel, "dst", dst, device, dst.dtype, src.numel());
}

// Accumulate's out and x of its size, each f32 or bf16.
inline absl::Status CheckAccumulateOperands(const TensorView& x, const TensorView& out,
                                            DeviceType device) {
  constexpr const char* kKernel = "Accumulate";
  TITAN_RETURN_IF_ERROR(ExpectActivation(kKernel, "out", out, device));
  return ExpectActivation(kKernel, "x", x, device, out.numel());
}

// Copy's src and dst of its dtype and size.
inline absl::Status CheckCopyOperands(const TensorView& src, const TensorView& dst,
                                      DeviceType device) {
  TITAN_RETURN_IF_ERROR(ExpectOperand("Copy", "src", src, device, src.dtype));
  return ExpectOperand("Copy", "dst", dst, device, src.dtype, src.numel());
}

}  // namespace titan

#endif  // TITAN_COMPUTE_OPERANDS_H_
