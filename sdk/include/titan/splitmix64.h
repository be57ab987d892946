// SplitMix64's finalizer: a cheap bijective mix, so nearby keys (seed, index, epoch, ...) give
// unrelated 64-bit values. Counter-based initialization (titan/truncated_normal.h) and the data
// order both draw on it; a CUDA backend compiles it into its kernels.
#ifndef TITAN_SPLITMIX64_H_
#define TITAN_SPLITMIX64_H_

#include <cstdint>

#if defined(__CUDACC__)
#define TITAN_HOST_DEVICE __host__ __device__
#else
#define TITAN_HOST_DEVICE
#endif

namespace titan {

TITAN_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace titan

#endif  // TITAN_SPLITMIX64_H_
