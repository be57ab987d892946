// One rank's peak FLOP/s, the denominator of MFU: given by the recipe, this CPU's theoretical
// peak from its vector units and clock, or measured by a matmul probe; with how it was obtained.
#ifndef TITAN_CORE_TRAIN_PEAK_FLOPS_H_
#define TITAN_CORE_TRAIN_PEAK_FLOPS_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "titan/device.h"

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
// A device's reachable matmul TFLOP/s: the best of kPeakProbes n x n x n GEMMs with `dtype`
// operands (f32 or bf16, products in f32) on its compute, after two untimed ones. The operands
// hold varied values: a GPU multiplies zeros faster.
absl::StatusOr<double> MeasureDevicePeakTflops(DevicePlugin& device, DType dtype, int n = 4096);
// The peak for MFU of a rank that computes on `device` (null: the CPU built into the core):
// `configured` when above 0; on the CPU, ThisMachinePeak; on another device, the GEMM ceiling
// that MeasureDevicePeakTflops finds with the matmuls' dtype at size n.
absl::StatusOr<PeakFlops> RankPeak(double configured, DevicePlugin* device, DType matmul_dtype,
                                   int n = 4096);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_PEAK_FLOPS_H_
