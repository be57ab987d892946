// SplitMix64's finalizer: a cheap bijective mix, so nearby keys (seed, index, epoch, ...) give
// unrelated 64-bit values. Counter-based initialization and the data order both draw on it.
#ifndef TITAN_CORE_TENSOR_SPLITMIX64_H_
#define TITAN_CORE_TENSOR_SPLITMIX64_H_

#include <cstdint>

namespace titan {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_SPLITMIX64_H_
