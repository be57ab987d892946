// Scalar conversions between f32 and the 16-bit float formats (bf16, IEEE f16), for plugins
// and the core alike. Rounding is to nearest, ties to even, as PyTorch's .to() does.
#ifndef TITAN_FLOAT16_H_
#define TITAN_FLOAT16_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "titan/tensor_view.h"

namespace titan {

inline float Bf16ToF32(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// NaN stays NaN.
inline uint16_t F32ToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  // Both results, then a select: no branch, so loops over arrays vectorize.
  const uint32_t quiet_nan = (bits >> 16) | 0x40u;
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

inline float F16ToF32(uint16_t bits) {
  const float sign = (bits & 0x8000) ? -1.0f : 1.0f;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return mantissa == 0 ? sign * INFINITY : NAN;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

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

// Element i of an f32, bf16 or f16 buffer as f32, and the other way.
inline float LoadAsF32(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::kBF16:
      return Bf16ToF32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

inline void StoreF32(void* data, DType dtype, int64_t i, float value) {
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

}  // namespace titan

#endif  // TITAN_FLOAT16_H_
