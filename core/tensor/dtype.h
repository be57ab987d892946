// Scalar conversions between f32 and the 16-bit float formats. Float8 encodings live with the
// float8 plugin, which owns their scaling rules.
#ifndef TITAN_CORE_TENSOR_DTYPE_H_
#define TITAN_CORE_TENSOR_DTYPE_H_

#include <cstdint>
#include <cstring>

#include "titan/status.h"
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

float F16ToF32(uint16_t bits);
uint16_t F32ToF16(float value);

// Copies src into dst converting element types; both contiguous, same element count, each one
// of f32, bf16, f16.
absl::Status ConvertTensor(const TensorView& src, const TensorView& dst);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_DTYPE_H_
