// Float8 encodings used in training (OCP FP8): e4m3 (the "fn" variant: no infinities, one NaN,
// largest finite 448) and e5m2 (IEEE-like, largest finite 57344). Casts round to nearest,
// ties to even, and saturate: values beyond the largest finite become it.
#ifndef TITAN_FLOAT8_CAST_H_
#define TITAN_FLOAT8_CAST_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

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

// 2^e for e in f32's normal range, from its bits: std::ldexp is a libm call, and the encoder
// below runs once per element of every Float8 GEMM operand.
inline float PowerOfTwo(int e) {
  const uint32_t bits = static_cast<uint32_t>(e + 127) << 23;
  float value = 0.0f;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline uint8_t EncodeFloat8(float x, const Float8Format& format) {
  if (std::isnan(x)) return kNaNCode;
  const int m = format.mantissa_bits;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float magnitude = std::min(std::fabs(x), format.max_finite);  // x is not NaN here
  // Below the smallest normal, codes count quanta of 2^(1 - bias - m): scaling by a power of two
  // is exact, so rint rounds the true value, ties to even (2^m quanta is the smallest normal's
  // code, which the count then spells).
  if (magnitude < PowerOfTwo(1 - format.exponent_bias)) {
    return sign |
           static_cast<uint8_t>(std::rint(magnitude * PowerOfTwo(m + format.exponent_bias - 1)));
  }
  // A normal: round the f32 mantissa to m bits, ties to even, on its bits (a carry moves into
  // the exponent as it should); the largest finite value is a code, so nothing rounds past it.
  uint32_t bits = 0;
  std::memcpy(&bits, &magnitude, sizeof(bits));
  const int shift = 23 - m;
  bits += (1u << (shift - 1)) - 1 + ((bits >> shift) & 1);
  const int exponent = static_cast<int>(bits >> 23) - 127;
  const int mantissa = static_cast<int>(bits >> shift) & ((1 << m) - 1);
  return sign | static_cast<uint8_t>(((exponent + format.exponent_bias) << m) | mantissa);
}

}  // namespace titan::float8

#endif  // TITAN_FLOAT8_CAST_H_
