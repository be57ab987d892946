// f32 <-> bf16 / f16 on the device, bit for bit as titan/float16.h converts on the host (round to
// nearest even; NaN stays NaN with the same codes), so a cast on the GPU equals the CPU's.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_FLOAT_CONVERT_CUH_
#define TITAN_PLUGINS_DEVICE_CUDA_FLOAT_CONVERT_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace titan::cuda {

__device__ inline float Bf16ToF32(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

__device__ inline uint16_t F32ToBf16(float value) {
  uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

__device__ inline float F16ToF32(uint16_t bits) {
  const float sign = (bits & 0x8000) ? -1.0f : 1.0f;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return mantissa == 0 ? sign * INFINITY : NAN;
  if (exponent == 0) return sign * ldexpf(static_cast<float>(mantissa), -24);
  return sign * ldexpf(static_cast<float>(mantissa | 0x400), exponent - 25);
}

__device__ inline uint16_t F32ToF16(float value) {
  if (isnan(value)) return 0x7e00;
  const uint16_t sign = signbit(value) ? 0x8000 : 0;
  const float magnitude = fabsf(value);
  if (magnitude >= 65520.0f) return sign | 0x7c00;
  int exponent = 0;
  frexpf(magnitude, &exponent);
  exponent = max(exponent - 1, -14);
  const int units = static_cast<int>(rintf(ldexpf(magnitude, 10 - exponent)));
  if (units == 0) return sign;
  if (units < 0x400) return sign | static_cast<uint16_t>(units);
  const int biased = exponent + 15 + (units >> 11);
  const int mantissa = (units >> (units >> 11)) & 0x3ff;
  return sign | static_cast<uint16_t>((biased << 10) | mantissa);
}

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_FLOAT_CONVERT_CUH_
