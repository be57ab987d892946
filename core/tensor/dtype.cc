#include "core/tensor/dtype.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/tensor/vector_kernels.h"

namespace titan {

namespace {

bool IsFloat16Or32(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

}  // namespace

absl::Status ConvertTensor(const TensorView& src, const TensorView& dst) {
  if (!IsFloat16Or32(src.dtype) || !IsFloat16Or32(dst.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConvertTensor: expected f32, bf16 or f16, found ", DTypeName(src.dtype),
                     " -> ", DTypeName(dst.dtype)));
  }
  if (src.numel() != dst.numel() || !src.is_contiguous() || !dst.is_contiguous()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConvertTensor: expected contiguous tensors of equal size, found ",
                     src.numel(), " and ", dst.numel(), " elements"));
  }
  const int64_t n = src.numel();
  // Mixed precision's casts, in vector form on the CPU found.
  if (src.dtype == DType::kF32 && dst.dtype == DType::kBF16) {
    VectorCastF32ToBf16(src.data_as<const float>(), dst.data_as<uint16_t>(), n);
    return absl::OkStatus();
  }
  if (src.dtype == DType::kBF16 && dst.dtype == DType::kF32) {
    VectorCastBf16ToF32(src.data_as<const uint16_t>(), dst.data_as<float>(), n);
    return absl::OkStatus();
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    StoreF32(dst.data, dst.dtype, i, LoadAsF32(src.data, src.dtype, i));
  return absl::OkStatus();
}

}  // namespace titan
