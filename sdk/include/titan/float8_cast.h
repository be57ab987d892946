// Float8 encodings used in training (OCP FP8): e4m3 (the "fn" variant: no infinities, one NaN,
// largest finite 448) and e5m2 (IEEE-like, largest finite 57344). Casts round to nearest,
// ties to even, and saturate: values beyond the largest finite become it.
#ifndef TITAN_FLOAT8_CAST_H_
#define TITAN_FLOAT8_CAST_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace titan::float8 {

struct Float8Format {
  int mantissa_bits;
  int exponent_bias;
  float max_finite;
  bool has_infinity;  // e5m2 keeps IEEE infinities; e4m3fn spends that code on finite values
};

inline constexpr Float8Format kE4M3 = {3, 7, 448.0f, false};
inline constexpr Float8Format kE5M2 = {2, 15, 57344.0f, true};
inline constexpr uint8_t kNaNCode = 0x7f;  // a NaN in both formats

inline float DecodeFloat8(uint8_t code, const Float8Format& format) {
  const int m = format.mantissa_bits;
  const int exponent_mask = (1 << (7 - m)) - 1;
  const int exponent = (code >> m) & exponent_mask;
  const int mantissa = code & ((1 << m) - 1);
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  if (exponent == exponent_mask) {
    if (format.has_infinity) return mantissa == 0 ? sign * INFINITY : NAN;
    if (mantissa == (1 << m) - 1) return NAN;
  }
  if (exponent == 0)
    return sign * std::ldexp(static_cast<float>(mantissa), 1 - format.exponent_bias - m);
  return sign *
         std::ldexp(static_cast<float>((1 << m) + mantissa), exponent - format.exponent_bias - m);
}

inline uint8_t EncodeFloat8(float x, const Float8Format& format) {
  if (std::isnan(x)) return kNaNCode;
  const int m = format.mantissa_bits;
  const int min_exponent = 1 - format.exponent_bias;  // of the smallest normal
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  float magnitude = std::fmin(std::fabs(x), format.max_finite);
  int exponent = 0;
  std::frexp(magnitude, &exponent);
  exponent = std::max(exponent - 1, min_exponent);  // subnormals share the smallest quantum
  // Scaling by a power of two is exact, so rint rounds the true value (ties to even).
  float units = std::rint(std::ldexp(magnitude, m - exponent));
  float rounded = std::fmin(std::ldexp(units, exponent - m), format.max_finite);
  if (rounded == 0.0f) return sign;
  std::frexp(rounded, &exponent);
  exponent -= 1;
  if (exponent < min_exponent) {
    return sign | static_cast<uint8_t>(std::ldexp(rounded, format.exponent_bias - 1 + m));
  }
  const int mantissa = static_cast<int>(std::ldexp(rounded, m - exponent)) - (1 << m);
  return sign | static_cast<uint8_t>(((exponent + format.exponent_bias) << m) | mantissa);
}

}  // namespace titan::float8

#endif  // TITAN_FLOAT8_CAST_H_
