// The initial weights' draws, one formula for every backend: element `index` of a parameter
// drawn from Normal(0, std) cut to [low, high] is a pure function of (key, index), so it does not
// depend on the thread count or the device, and a shard can draw its own piece. A device
// backend's FillTruncatedNormal compiles this header into its kernels (CUDA: __host__ __device__).
// Its double math is the device's: an element can then differ from the CPU's in its last f32 bit.
#ifndef TITAN_TRUNCATED_NORMAL_H_
#define TITAN_TRUNCATED_NORMAL_H_

#include <math.h>

#include <cstdint>

#include "titan/splitmix64.h"

namespace titan::truncated_normal {

// A uniform double in [0, 1) of 53 random bits.
TITAN_HOST_DEVICE inline double Uniform(uint64_t key) {
  return static_cast<double>(SplitMix64(key) >> 11) * 0x1.0p-53;
}

// A standard normal for (key, index, attempt), by Box-Muller.
TITAN_HOST_DEVICE inline double Normal(uint64_t key, int64_t index, int attempt) {
  const uint64_t mixed = key ^ SplitMix64(static_cast<uint64_t>(index) * 64 + attempt);
  const double u1 = Uniform(mixed), u2 = Uniform(mixed ^ 0x5851f42d4c957f2dull);
  return sqrt(-2.0 * log1p(-u1)) * cos(2 * 0x1.921fb54442d18p+1 * u2);  // 2 pi u2
}

// Normal(0, std) redrawn until inside [low, high] (at most 64 draws, then clamped), as
// torch.nn.init.trunc_normal_ samples, rounded to f32.
TITAN_HOST_DEVICE inline float At(uint64_t key, int64_t index, double std, double low,
                                  double high) {
  double value = 0;
  for (int attempt = 0; attempt < 64; ++attempt) {
    value = std * Normal(key, index, attempt);
    if (value >= low && value <= high) break;
  }
  return static_cast<float>(fmin(fmax(value, low), high));
}

}  // namespace titan::truncated_normal

#endif  // TITAN_TRUNCATED_NORMAL_H_
