#include "core/tensor/dtype.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace titan {

float F16ToF32(uint16_t bits) {
  const float sign = (bits & 0x8000) ? -1.0f : 1.0f;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return mantissa == 0 ? sign * INFINITY : NAN;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

uint16_t F32ToF16(float value) {
  if (std::isnan(value)) return 0x7e00;
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const float magnitude = std::fabs(value);
  if (magnitude >= 65520.0f) return sign | 0x7c00;  // rounds past the largest finite, 65504
  int exponent = 0;
  std::frexp(magnitude, &exponent);
  exponent = std::max(exponent - 1, -14);  // subnormals share the smallest quantum, 2^-24
  // Scaling by a power of two is exact, so rint rounds the true value (ties to even).
  const int units = static_cast<int>(std::rint(std::ldexp(magnitude, 10 - exponent)));
  if (units == 0) return sign;
  if (units < 0x400) return sign | static_cast<uint16_t>(units);  // subnormal
  // units may have rounded up to 2^11, which the next exponent absorbs.
  const int biased = exponent + 15 + (units >> 11);
  const int mantissa = (units >> (units >> 11)) & 0x3ff;
  return sign | static_cast<uint16_t>((biased << 10) | mantissa);
}

namespace {

float LoadAsF32(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16:
      return Bf16ToF32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

void StoreF32(void* data, DType dtype, int64_t i, float value) {
  switch (dtype) {
    case DType::kBF16:
      static_cast<uint16_t*>(data)[i] = F32ToBf16(value);
      break;
    case DType::kF16:
      static_cast<uint16_t*>(data)[i] = F32ToF16(value);
      break;
    default:
      static_cast<float*>(data)[i] = value;
  }
}

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
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    StoreF32(dst.data, dst.dtype, i, LoadAsF32(src.data, src.dtype, i));
  return absl::OkStatus();
}

}  // namespace titan
