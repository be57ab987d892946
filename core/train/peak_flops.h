// One rank's peak FLOP/s, the denominator of MFU: given by the recipe, this CPU's theoretical
// peak from its vector units and clock, or measured by a matmul probe; with how it was obtained.
#ifndef TITAN_CORE_TRAIN_PEAK_FLOPS_H_
#define TITAN_CORE_TRAIN_PEAK_FLOPS_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace titan {

// One rank's peak FLOP/s, for MFU, and how it was obtained (the log states it).
struct PeakFlops {
  double tflops = 0;
  std::string source;
};

// A quick f32 matmul probe of this machine's reachable TFLOP/s: the best of kPeakProbes n x n x n
// sgemms after two untimed ones. A busy machine makes it low.
inline constexpr int kPeakProbes = 8;
double MeasurePeakTflops(int n = 1024);
// The f32 peak of `cores` cores of the x86 CPU that `cpuinfo` (/proc/cpuinfo's text) describes:
// cores (at most its physical ones) x clock x FLOP per cycle of its widest vector FMA, counting
// two FMA units per core, so that it bounds what any such CPU reaches (AVX-512 64, AVX2 with FMA
// 32, AVX 16). The clock is `max_khz` (cpufreq's cpuinfo_max_freq) when given, else the fastest
// "cpu MHz". Nullopt when the text says too little (another architecture).
std::optional<PeakFlops> CpuTheoreticalPeak(absl::string_view cpuinfo, absl::string_view max_khz,
                                            int cores);
// The peak for MFU: `configured` (metrics.peak_tflops) when above 0, else this machine's
// theoretical CPU peak over the threads titan computes with, else what `probe` measures.
PeakFlops ChoosePeak(double configured, const std::optional<PeakFlops>& theoretical,
                     const std::function<double()>& probe);
// ChoosePeak on this machine, with /proc/cpuinfo and MeasurePeakTflops.
PeakFlops ThisMachinePeak(double configured);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_PEAK_FLOPS_H_
