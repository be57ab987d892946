// Conversions between f32 and the 16-bit float formats, rounding as PyTorch's .to() does. In
// the SDK so the core and every plugin that stores or moves tensors (checkpoints, collectives)
// round alike.
#ifndef TITAN_DTYPE_CONVERT_H_
#define TITAN_DTYPE_CONVERT_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "titan/tensor_view.h"

namespace titan {

inline float Bf16ToF32(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// Rounds to nearest, ties to even, as PyTorch's .to(torch.bfloat16) does; NaN stays NaN.
inline uint16_t F32ToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float F16ToF32(uint16_t bits) {
  const float sign = (bits & 0x8000) ? -1.0f : 1.0f;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return mantissa == 0 ? sign * INFINITY : NAN;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

// Rounds to nearest, ties to even; past the largest finite value (65504) gives infinity.
inline uint16_t F32ToF16(float value) {
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

inline bool IsConvertibleFloat(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

// Element i of a buffer of f32, bf16 or f16, which need not be aligned (a file's bytes).
inline float LoadAsF32(const void* data, DType dtype, int64_t i) {
  const char* at = static_cast<const char*>(data) + i * static_cast<int64_t>(DTypeSize(dtype));
  if (dtype == DType::kF32) {
    float value;
    std::memcpy(&value, at, sizeof(value));
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, at, sizeof(bits));
  return dtype == DType::kBF16 ? Bf16ToF32(bits) : F16ToF32(bits);
}

inline void StoreF32(void* data, DType dtype, int64_t i, float value) {
  char* at = static_cast<char*>(data) + i * static_cast<int64_t>(DTypeSize(dtype));
  if (dtype == DType::kF32) {
    std::memcpy(at, &value, sizeof(value));
    return;
  }
  const uint16_t bits = dtype == DType::kBF16 ? F32ToBf16(value) : F32ToF16(value);
  std::memcpy(at, &bits, sizeof(bits));
}

// Copies `count` elements from src to dst, each of f32, bf16 or f16; a plain copy when the
// types agree, so values that need no conversion keep their exact bits.
inline absl::Status ConvertElements(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                                    int64_t count) {
  if (!IsConvertibleFloat(src_dtype) || !IsConvertibleFloat(dst_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot convert ", DTypeName(src_dtype), " to ",
                                                   DTypeName(dst_dtype),
                                                   ": expected f32, bf16 or f16"));
  }
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, static_cast<size_t>(count) * DTypeSize(src_dtype));
    return absl::OkStatus();
  }
  for (int64_t i = 0; i < count; ++i) StoreF32(dst, dst_dtype, i, LoadAsF32(src, src_dtype, i));
  return absl::OkStatus();
}

}  // namespace titan

#endif  // TITAN_DTYPE_CONVERT_H_
