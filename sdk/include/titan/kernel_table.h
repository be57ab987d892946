// The kernel table's fingerprint: FNV-1a (64 bits) over every entry's name and operand list as
// titan/compute_kernels.inc spells them. Every plugin's descriptor carries the fingerprint of the
// table it was built with, and the loader refuses one built against another table, naming both:
// its kernel calls would land on the wrong entries of the compute interface.
#ifndef TITAN_KERNEL_TABLE_H_
#define TITAN_KERNEL_TABLE_H_

#include <cstdint>
#include <string_view>

#include "titan/abi.h"

namespace titan {

// One line per kernel: "Name(operands)", whitespace as the preprocessor normalizes it.
#define TITAN_KERNEL(name, operands, names, check) #name #operands "\n"
inline constexpr std::string_view kKernelTableText =
#include "titan/compute_kernels.inc"
    ;
#undef TITAN_KERNEL

constexpr uint64_t Fnv1a64(std::string_view text) {
  uint64_t hash = 14695981039346656037ULL;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return hash;
}

inline constexpr uint64_t kKernelTableFingerprint = Fnv1a64(kKernelTableText);

// The table is part of the ABI. If this fails, titan/compute_kernels.inc changed: bump
// TITAN_ABI_VERSION in titan/abi.h and set TITAN_KERNEL_TABLE_FINGERPRINT there to the left-hand
// value of the comparison the compiler prints below.
static_assert(kKernelTableFingerprint == TITAN_KERNEL_TABLE_FINGERPRINT,
              "the kernel table (titan/compute_kernels.inc) changed: bump TITAN_ABI_VERSION and "
              "record the new TITAN_KERNEL_TABLE_FINGERPRINT in titan/abi.h");

}  // namespace titan

#endif  // TITAN_KERNEL_TABLE_H_
