// Float8 kernels of the CUDA compute. The GEMM runs through cuBLASLt's FP8 path where the GPU has
// one (sm_89+): scale pointers for tensor-wise scales, the outer-vector scale mode for row-wise
// ones. Whatever that path does not take (e5m2 by e5m2, mixed granularities, shapes cuBLASLt
// refuses, older GPUs) gets the unscaled products, from cuBLASLt or titan's plain kernel, and a
// small kernel that applies the scales as CpuCompute does.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cuda_compute.h"
#include "cuda_status.h"
#include "float8_kernels.h"
#include "operands.h"

namespace titan::cuda {
namespace {

bool IsFloat8(DType dtype) { return dtype == DType::kF8E4M3 || dtype == DType::kF8E5M2; }
Float8Format FormatOf(DType dtype) {
  return dtype == DType::kF8E4M3 ? Float8Format::kE4M3 : Float8Format::kE5M2;
}
cudaDataType_t LtTypeOf(DType dtype) {
  return dtype == DType::kF8E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}

absl::Status ExpectFloat8(const char* kernel, const char* operand, const TensorView& x) {
  if (!IsFloat8(x.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kernel, ": operand '", operand, "' expected f8e4m3 or f8e5m2, found ", DTypeName(x.dtype)));
  }
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, operand, x, 2));
  return Expect(kernel, operand, x, x.dtype);
}

absl::Status ExpectScales(const char* kernel, const char* operand, const TensorView& scales,
                          int64_t rows) {
  TITAN_RETURN_IF_ERROR(Expect(kernel, operand, scales, DType::kF32));
  if (scales.numel() != 1 && scales.numel() != rows) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": operand '", operand,
                                                   "' expected 1 (per tensor) or ", rows,
                                                   " (per row) scales, found ", scales.numel()));
  }
  return absl::OkStatus();
}

// cuBLASLt refusing an FP8 problem (no algorithm, an unsupported type pair or shape) sends it to
// the plain path; any other failure is reported.
bool Refused(const absl::Status& status) {
  return absl::IsUnimplemented(status) ||
         absl::StrContains(status.message(), "CUBLAS_STATUS_NOT_SUPPORTED") ||
         absl::StrContains(status.message(), "CUBLAS_STATUS_INVALID_VALUE");
}

}  // namespace

absl::Status CudaCompute::Float8Gemm(const TensorView& a, const TensorView& inverse_scale_a,
                                     const TensorView& b, const TensorView& inverse_scale_b,
                                     float alpha, float beta, TensorView c) {
  constexpr const char* kKernel = "Float8Gemm";
  TITAN_RETURN_IF_ERROR(ExpectFloat8(kKernel, "a", a));
  TITAN_RETURN_IF_ERROR(ExpectFloat8(kKernel, "b", b));
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "c", c, 2));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "c", c, DType::kF32));
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[0];
  if (b.shape[1] != k || c.shape[0] != m || c.shape[1] != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(kKernel, ": shapes do not chain: a [", m, ", ", k, "] . b^T (b [", n, ", ",
                     b.shape[1], "]) into c [", c.shape[0], ", ", c.shape[1], "]"));
  }
  TITAN_RETURN_IF_ERROR(ExpectScales(kKernel, "inverse_scale_a", inverse_scale_a, m));
  TITAN_RETURN_IF_ERROR(ExpectScales(kKernel, "inverse_scale_b", inverse_scale_b, n));
  TITAN_RETURN_IF_ERROR(Ready());
  if (m == 0 || n == 0) return absl::OkStatus();
  const bool row_a = inverse_scale_a.numel() != 1 || m == 1;
  const bool row_b = inverse_scale_b.numel() != 1 || n == 1;
  const bool lt_types =
      HasFloat8TensorCores() && k > 0 && !(a.dtype == DType::kF8E5M2 && b.dtype == DType::kF8E5M2);
  // cuBLASLt's A is b [n, k] and its B is a [m, k], both with k leading: c^T = b a^T.
  LtMatmul call{
      .a = {b.data, LtTypeOf(b.dtype), k, n, k, true, F(inverse_scale_b)},
      .b = {a.data, LtTypeOf(a.dtype), k, m, k, false, F(inverse_scale_a)},
      .c = c.data,
      .c_rows = n,
      .c_columns = m,
      .compute = CUBLAS_COMPUTE_32F,
      .alpha = alpha,
      .beta = beta,
      .outer_vector_scales = false,
  };
  const bool both_per_row = inverse_scale_a.numel() == m && inverse_scale_b.numel() == n;
  if (lt_types && ((!row_a && !row_b) || both_per_row)) {
    call.outer_vector_scales = row_a || row_b;
    absl::Status scaled = RunLtMatmul(kKernel, call);
    if (!Refused(scaled)) return scaled;
  }
  TITAN_ASSIGN_OR_RETURN(StreamScratch sums, Scratch(static_cast<size_t>(m * n) * sizeof(float),
                                                     "Float8Gemm unscaled products"));
  absl::Status products = absl::UnimplementedError("no FP8 tensor cores");
  if (lt_types) {
    LtMatmul unscaled = call;
    unscaled.a.scale = unscaled.b.scale = nullptr;
    unscaled.outer_vector_scales = false;
    unscaled.c = sums.as<float>();
    unscaled.alpha = 1.0f;
    unscaled.beta = 0.0f;
    products = RunLtMatmul(kKernel, unscaled);
    if (!products.ok() && !Refused(products)) return products;
  }
  if (!products.ok()) {
    TITAN_RETURN_IF_ERROR(Check(
        LaunchFloat8Products(Data<const uint8_t>(a), FormatOf(a.dtype), Data<const uint8_t>(b),
                             FormatOf(b.dtype), sums.as<float>(), m, n, k, stream_),
        "Float8Gemm kernel launch"));
  }
  return Check(LaunchFloat8Epilogue(sums.as<float>(), F(inverse_scale_a), row_a, F(inverse_scale_b),
                                    row_b, alpha, beta, F(c), m, n, stream_),
               "Float8Gemm kernel launch");
}

absl::Status CudaCompute::Float8Quantize(const TensorView& x, const Float8Scaling& scaling,
                                         TensorView out, TensorView inverse_scales) {
  constexpr const char* kKernel = "Float8Quantize";
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "x", x, 2));
  if (x.dtype != DType::kF32 && x.dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat(kKernel, ": operand 'x' expected f32 or bf16, found ", DTypeName(x.dtype)));
  }
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "x", x, x.dtype));
  TITAN_RETURN_IF_ERROR(ExpectFloat8(kKernel, "out", out));
  const int64_t rows = x.shape[0], columns = x.shape[1];
  const int64_t out_rows = scaling.transpose ? columns : rows;
  const int64_t out_columns = scaling.transpose ? rows : columns;
  if (out.shape[0] != out_rows || out.shape[1] != out_columns) {
    return absl::InvalidArgumentError(
        absl::StrCat(kKernel, ": operand 'out' expected [", out_rows, ", ", out_columns, "]",
                     scaling.transpose ? " (x transposed)" : "", ", found [", out.shape[0], ", ",
                     out.shape[1], "]"));
  }
  const bool per_row = scaling.granularity == Float8Granularity::kRow;
  TITAN_RETURN_IF_ERROR(
      Expect(kKernel, "inverse_scales", inverse_scales, DType::kF32, per_row ? out_rows : 1));
  TITAN_RETURN_IF_ERROR(Ready());
  TITAN_ASSIGN_OR_RETURN(StreamScratch amax, Scratch(sizeof(float), "Float8Quantize amax"));
  const Float8QuantizeArgs args{x.data,
                                x.dtype == DType::kBF16,
                                rows,
                                columns,
                                scaling.transpose,
                                per_row,
                                scaling.power_of_two,
                                FormatOf(out.dtype),
                                Data<uint8_t>(out),
                                F(inverse_scales),
                                amax.as<float>()};
  return Check(LaunchFloat8Quantize(args, stream_), "Float8Quantize kernel launch");
}

}  // namespace titan::cuda
