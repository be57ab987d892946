// Reductions, casts and elementwise kernels of the CUDA compute.
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda_compute.h"
#include "cuda_status.h"
#include "elementwise_kernels.h"
#include "fill_kernel.h"
#include "operands.h"

namespace titan::cuda {
namespace {

// One of f32, bf16 and f16, as CheckCastOperands has made sure.
FloatFormat FormatOf(DType dtype) {
  if (dtype == DType::kF32) return FloatFormat::kF32;
  return dtype == DType::kBF16 ? FloatFormat::kBF16 : FloatFormat::kF16;
}

}  // namespace

absl::Status CudaCompute::RunSumOfSquares(std::span<const TensorView> tensors,
                                          std::span<const double> weights, TensorView out) {
  TITAN_RETURN_IF_ERROR(Ready());
  // [0, kSquareBlocks): one tensor's partial sums; [kSquareBlocks]: the running total.
  TITAN_ASSIGN_OR_RETURN(StreamScratch scratch,
                         Scratch((kSquareBlocks + 1) * sizeof(double), "SumOfSquares partials"));
  double* partials = scratch.as<double>();
  double* total = partials + kSquareBlocks;
  TITAN_RETURN_IF_ERROR(
      Check(cudaMemsetAsync(total, 0, sizeof(double), stream_), "cudaMemsetAsync (SumOfSquares)"));
  for (size_t t = 0; t < tensors.size(); ++t) {
    TITAN_RETURN_IF_ERROR(Check(
        LaunchSumOfSquares(F(tensors[t]), tensors[t].numel(), weights[t], partials, total, stream_),
        "SumOfSquares kernel launch"));
  }
  return Check(LaunchSplitDouble(total, F(out), stream_), "SumOfSquares kernel launch");
}

absl::Status CudaCompute::RunTranspose(const TensorView& src, TensorView dst) {
  const int element_size = static_cast<int>(DTypeSize(src.dtype));
  if (element_size != 1 && element_size != 2 && element_size != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("Transpose: elements of 1, 2 or 4 bytes, not ", DTypeName(src.dtype)));
  }
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(
      LaunchTranspose(src.data, dst.data, src.shape[0], src.shape[1], element_size, stream_),
      "Transpose kernel launch");
}

absl::Status CudaCompute::RunCast(const TensorView& src, TensorView dst) {
  const FloatFormat from = FormatOf(src.dtype), to = FormatOf(dst.dtype);
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchCast(src.data, from, dst.data, to, src.numel(), stream_),
               "Cast kernel launch");
}

absl::Status CudaCompute::RunFill(TensorView x, float value) {
  TITAN_RETURN_IF_ERROR(Ready());
  const auto count = static_cast<size_t>(x.numel());
  return Check(x.dtype == DType::kBF16 ? LaunchFillBf16(x.data, count, value, stream_)
                                       : LaunchFillF32(F(x), count, value, stream_),
               "Fill kernel launch");
}

absl::Status CudaCompute::RunFillTruncatedNormal(TensorView x, uint64_t key, double std, double low,
                                                 double high) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(
      LaunchFillTruncatedNormal(F(x), static_cast<size_t>(x.numel()), key, std, low, high, stream_),
      "FillTruncatedNormal kernel launch");
}

absl::Status CudaCompute::RunScale(TensorView x, float scale) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchScale(Out(x), x.numel(), scale, stream_), "Scale kernel launch");
}

absl::Status CudaCompute::RunAccumulate(const TensorView& x, TensorView out) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchAccumulate(In(x), Out(out), out.numel(), stream_), "Accumulate kernel launch");
}

}  // namespace titan::cuda
