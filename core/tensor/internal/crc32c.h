// CRC-32C (Castagnoli), the checksum of arena files: the SSE4.2 instruction where the CPU has
// it (several GB/s, so checking a large model's file costs little next to reading it), a table
// otherwise. Both give the same value; Crc32c("123456789") is 0xe3069283.
#ifndef TITAN_CORE_TENSOR_INTERNAL_CRC32C_H_
#define TITAN_CORE_TENSOR_INTERNAL_CRC32C_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace titan::internal {

inline constexpr std::array<uint32_t, 256> kCrc32cTable = [] {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
    table[i] = crc;
  }
  return table;
}();

// Continues `crc` (the value of the bytes so far; 0 to start) over `size` more bytes.
inline uint32_t ExtendCrc32cPortable(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = (crc >> 8) ^ kCrc32cTable[(crc ^ bytes[i]) & 0xffu];
  return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) inline uint32_t ExtendCrc32cSse42(uint32_t crc, const void* data,
                                                                    size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t state = ~crc;
  for (; size >= 8; size -= 8, bytes += 8) {
    uint64_t word;
    std::memcpy(&word, bytes, sizeof(word));
    state = _mm_crc32_u64(state, word);
  }
  uint32_t rest = static_cast<uint32_t>(state);
  for (; size > 0; --size, ++bytes) rest = _mm_crc32_u8(rest, *bytes);
  return ~rest;
}
#endif

inline uint32_t ExtendCrc32c(uint32_t crc, const void* data, size_t size) {
#if defined(__x86_64__)
  static const bool has_sse42 = __builtin_cpu_supports("sse4.2");
  if (has_sse42) return ExtendCrc32cSse42(crc, data, size);
#endif
  return ExtendCrc32cPortable(crc, data, size);
}

}  // namespace titan::internal

#endif  // TITAN_CORE_TENSOR_INTERNAL_CRC32C_H_
