#include "core/tensor/dtype.h"

#include <cmath>

#include "absl/strings/str_cat.h"

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
  // Mixed precision's casts, as typed loops the compiler vectorizes.
  if (src.dtype == DType::kF32 && dst.dtype == DType::kBF16) {
    const float* in = src.data_as<const float>();
    uint16_t* out = dst.data_as<uint16_t>();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = F32ToBf16(in[i]);
    return absl::OkStatus();
  }
  if (src.dtype == DType::kBF16 && dst.dtype == DType::kF32) {
    const uint16_t* in = src.data_as<const uint16_t>();
    float* out = dst.data_as<float>();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToF32(in[i]);
    return absl::OkStatus();
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    StoreF32(dst.data, dst.dtype, i, LoadAsF32(src.data, src.dtype, i));
  return absl::OkStatus();
}

}  // namespace titan
