#include "core/cpu/float8_encode.h"

#include <cstring>

// Built for the widest vectors the CPU has: GCC compiles the row loop once per listed x86-64
// level and the loader picks the clone for this CPU (AVX-512 encodes 16 values per instruction,
// the baseline's SSE2 4). Every clone is the same exact integer and f32 arithmetic.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TITAN_FLOAT8_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TITAN_FLOAT8_CLONES
#endif

namespace titan::float8 {
namespace {

constexpr uint32_t kMagnitudeMask = 0x7fffffffu;
constexpr uint32_t kInfinityBits = 0x7f800000u;

uint32_t BitsOf(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float FloatOf(uint32_t bits) {
  float value = 0.0f;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// mask ? a : b for a mask of all ones or all zeros. GCC keeps `?:` as a branch when an arm holds
// a float add (which may trap), and a branch stops the loop from vectorizing.
uint32_t Select(uint32_t mask, uint32_t a, uint32_t b) { return b ^ ((a ^ b) & mask); }

uint32_t MaskOf(bool condition) { return 0u - static_cast<uint32_t>(condition); }

// EncodeFloat8(x, kFormat), computing both of its paths and selecting one.
template <const Float8Format& kFormat>
inline uint8_t EncodeBranchFree(float x) {
  constexpr int m = kFormat.mantissa_bits, bias = kFormat.exponent_bias, shift = 23 - m;
  const uint32_t bits = BitsOf(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  // Saturation as an integer min: for non-negative floats the bits order as the values do. A NaN
  // saturates too, and is replaced by the NaN code at the end.
  const uint32_t max_finite = BitsOf(kFormat.max_finite);
  const uint32_t magnitude =
      (bits & kMagnitudeMask) < max_finite ? bits & kMagnitudeMask : max_finite;
  // Below the smallest normal the code counts quanta of 2^(1 - bias - m). Adding 2^(24 - m -
  // bias), whose ulp is that quantum, makes the FPU round the magnitude to a whole number of
  // quanta, ties to even, as EncodeFloat8's rint does; the count is then the sum's low bits.
  const float quantum_magic = PowerOfTwo(24 - m - bias);
  const uint32_t subnormal = BitsOf(FloatOf(magnitude) + quantum_magic) - BitsOf(quantum_magic);
  // A normal: EncodeFloat8's rounding of the mantissa on the bits; the f32 exponent field moves
  // down to the format's bias by one subtraction.
  const uint32_t rounded = magnitude + (1u << (shift - 1)) - 1 + ((magnitude >> shift) & 1);
  const uint32_t normal = (rounded >> shift) - (static_cast<uint32_t>(127 - bias) << m);
  const uint32_t smallest_normal = static_cast<uint32_t>(127 + 1 - bias) << 23;
  const uint32_t code = sign | Select(MaskOf(magnitude < smallest_normal), subnormal, normal);
  return static_cast<uint8_t>(
      Select(MaskOf((bits & kMagnitudeMask) > kInfinityBits), kNaNCode, code));
}

template <const Float8Format& kFormat>
TITAN_FLOAT8_CLONES void EncodeRow(const float* values, float scale, int64_t count,
                                   uint8_t* codes) {
#pragma omp simd
  for (int64_t i = 0; i < count; ++i) codes[i] = EncodeBranchFree<kFormat>(values[i] * scale);
}

bool SameFormat(const Float8Format& a, const Float8Format& b) {
  return a.mantissa_bits == b.mantissa_bits && a.exponent_bias == b.exponent_bias &&
         a.max_finite == b.max_finite;
}

}  // namespace

void EncodeFloat8Scaled(const float* values, float scale, int64_t count, const Float8Format& format,
                        uint8_t* codes) {
  if (SameFormat(format, kE4M3)) return EncodeRow<kE4M3>(values, scale, count, codes);
  if (SameFormat(format, kE5M2)) return EncodeRow<kE5M2>(values, scale, count, codes);
  for (int64_t i = 0; i < count; ++i) codes[i] = EncodeFloat8(values[i] * scale, format);
}

}  // namespace titan::float8
