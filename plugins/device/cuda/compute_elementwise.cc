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

bool FormatOf(DType dtype, FloatFormat* format) {
  switch (dtype) {
    case DType::kF32:
      *format = FloatFormat::kF32;
      return true;
    case DType::kBF16:
      *format = FloatFormat::kBF16;
      return true;
    case DType::kF16:
      *format = FloatFormat::kF16;
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::Status CudaCompute::SumOfSquares(std::span<const TensorView> tensors,
                                       std::span<const double> weights, TensorView out) {
  if (weights.size() != tensors.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SumOfSquares: ", tensors.size(), " tensors need as many weights, found ", weights.size()));
  }
  TITAN_RETURN_IF_ERROR(Expect("SumOfSquares", "out", out, DType::kF32, 2));
  for (const TensorView& x : tensors) {
    TITAN_RETURN_IF_ERROR(Expect("SumOfSquares", "tensors", x, DType::kF32));
  }
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

absl::Status CudaCompute::Transpose(const TensorView& src, TensorView dst) {
  TITAN_RETURN_IF_ERROR(CheckTransposeOperands(src, dst, DeviceType::kCuda));
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

absl::Status CudaCompute::Cast(const TensorView& src, TensorView dst) {
  FloatFormat from, to;
  if (!FormatOf(src.dtype, &from) || !FormatOf(dst.dtype, &to)) {
    return absl::InvalidArgumentError(absl::StrCat("Cast: expected f32, bf16 or f16, found ",
                                                   DTypeName(src.dtype), " -> ",
                                                   DTypeName(dst.dtype)));
  }
  TITAN_RETURN_IF_ERROR(Expect("Cast", "src", src, src.dtype));
  TITAN_RETURN_IF_ERROR(Expect("Cast", "dst", dst, dst.dtype, src.numel()));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchCast(src.data, from, dst.data, to, src.numel(), stream_),
               "Cast kernel launch");
}

absl::Status CudaCompute::Fill(TensorView x, float value) {
  TITAN_RETURN_IF_ERROR(Expect("Fill", "x", x, DType::kF32));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchFillF32(F(x), static_cast<size_t>(x.numel()), value, stream_),
               "Fill kernel launch");
}

absl::Status CudaCompute::Scale(TensorView x, float scale) {
  TITAN_RETURN_IF_ERROR(Expect("Scale", "x", x, DType::kF32));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchScale(F(x), x.numel(), scale, stream_), "Scale kernel launch");
}

absl::Status CudaCompute::Accumulate(const TensorView& x, TensorView out) {
  TITAN_RETURN_IF_ERROR(Expect("Accumulate", "out", out, DType::kF32));
  TITAN_RETURN_IF_ERROR(Expect("Accumulate", "x", x, DType::kF32, out.numel()));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchAccumulate(F(x), F(out), out.numel(), stream_), "Accumulate kernel launch");
}

}  // namespace titan::cuda
