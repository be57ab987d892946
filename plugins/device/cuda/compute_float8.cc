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

Float8Format FormatOf(DType dtype) {
  return dtype == DType::kF8E4M3 ? Float8Format::kE4M3 : Float8Format::kE5M2;
}
cudaDataType_t LtTypeOf(DType dtype) {
  return dtype == DType::kF8E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}

// cuBLASLt refusing an FP8 problem (no algorithm, an unsupported type pair or shape) sends it to
// the plain path; any other failure is reported.
bool Refused(const absl::Status& status) {
  return absl::IsUnimplemented(status) ||
         absl::StrContains(status.message(), "CUBLAS_STATUS_NOT_SUPPORTED") ||
         absl::StrContains(status.message(), "CUBLAS_STATUS_INVALID_VALUE");
}

}  // namespace

absl::Status CudaCompute::RunFloat8Gemm(const TensorView& a, const TensorView& inverse_scale_a,
                                        const TensorView& b, const TensorView& inverse_scale_b,
                                        float alpha, float beta, TensorView c) {
  constexpr const char* kKernel = "Float8Gemm";
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[0];
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

absl::Status CudaCompute::RunFloat8Quantize(const TensorView& x, const Float8Scaling& scaling,
                                            TensorView out, TensorView inverse_scales) {
  const int64_t rows = x.shape[0], columns = x.shape[1];
  const bool per_row = scaling.granularity == Float8Granularity::kRow;
  TITAN_RETURN_IF_ERROR(Ready());
  const bool given = scaling.amax.data != nullptr;
  // A transposed row-wise quantization gathers its rows' amaxes (columns of x) in a pass first.
  const int64_t amaxes = per_row && scaling.transpose && !given ? columns : 1;
  TITAN_ASSIGN_OR_RETURN(StreamScratch amax, Scratch(static_cast<size_t>(amaxes) * sizeof(float),
                                                     "Float8Quantize amax"));
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
                                given ? F(scaling.amax) : amax.as<float>(),
                                given};
  return Check(LaunchFloat8Quantize(args, stream_), "Float8Quantize kernel launch");
}

absl::Status CudaCompute::RunFloat8Amax(const TensorView& x, const Float8Scaling& scaling,
                                        TensorView amax) {
  TITAN_RETURN_IF_ERROR(Ready());
  const Float8QuantizeArgs args{x.data,
                                x.dtype == DType::kBF16,
                                x.shape[0],
                                x.shape[1],
                                scaling.transpose,
                                scaling.granularity == Float8Granularity::kRow,
                                scaling.power_of_two,
                                Float8Format::kE4M3,
                                nullptr,
                                nullptr,
                                F(amax),
                                false};
  return Check(LaunchFloat8Amax(args, stream_), "Float8Amax kernel launch");
}

absl::Status CudaCompute::RunAbsMax(std::span<const TensorView> tensors, TensorView out) {
  TITAN_RETURN_IF_ERROR(Ready());
  for (size_t t = 0; t < tensors.size(); ++t) {
    TITAN_RETURN_IF_ERROR(Check(LaunchAbsMax(tensors[t].data, tensors[t].dtype == DType::kBF16,
                                             tensors[t].numel(), F(out) + t, stream_),
                                "AbsMax kernel launch"));
  }
  return absl::OkStatus();
}

}  // namespace titan::cuda
