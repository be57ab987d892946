#include "core/train/peak_flops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "tests/support/scrambled_device.h"

namespace titan {
namespace {

using ::testing::HasSubstr;

// Two processors of /proc/cpuinfo, cut to the fields read, as two cores of one package show them.
std::string CpuInfo(const std::string& flags, const std::string& mhz = "2596.096",
                    int processors = 2, int cores = 2) {
  std::string text;
  for (int p = 0; p < processors; ++p) {
    absl::StrAppend(&text, "processor\t: ", p, "\nmodel name\t: Test CPU\ncpu MHz\t\t: ", mhz,
                    "\nphysical id\t: 0\ncore id\t\t: ", p % cores, "\nflags\t\t: fpu sse ", flags,
                    " lm\n\n");
  }
  return text;
}

TEST(CpuTheoreticalPeak, CoresTimesClockTimesTheWidestFma) {
  std::optional<PeakFlops> avx512 = CpuTheoreticalPeak(CpuInfo("avx avx2 fma avx512f"), "", 2);
  ASSERT_TRUE(avx512.has_value());
  EXPECT_DOUBLE_EQ(avx512->tflops, 2 * 2596.096e6 * 64 / 1e12);
  EXPECT_EQ(avx512->source,
            "this CPU's theoretical f32 peak: 2 core(s) x 2.60 GHz (the fastest \"cpu MHz\" of "
            "/proc/cpuinfo) x 64 FLOP/cycle (AVX-512 FMA: 2 units x 16 f32 lanes x 2)");
  EXPECT_DOUBLE_EQ(CpuTheoreticalPeak(CpuInfo("avx avx2 fma"), "", 2)->tflops,
                   2 * 2596.096e6 * 32 / 1e12);
  EXPECT_DOUBLE_EQ(CpuTheoreticalPeak(CpuInfo("avx"), "", 1)->tflops, 2596.096e6 * 16 / 1e12);
  // cpufreq's maximum (kHz) beats the current clock; it bounds turbo.
  std::optional<PeakFlops> turbo = CpuTheoreticalPeak(CpuInfo("avx2 fma"), "3700000\n", 2);
  EXPECT_DOUBLE_EQ(turbo->tflops, 2 * 3.7e9 * 32 / 1e12);
  EXPECT_THAT(turbo->source, HasSubstr("3.70 GHz (cpufreq's cpuinfo_max_freq)"));
}

TEST(CpuTheoreticalPeak, CountsOnlyPhysicalCoresAndKnowsWhenItCannotTell) {
  // Four SMT threads on two cores share the FMA units: 8 threads count as 2 cores.
  EXPECT_DOUBLE_EQ(CpuTheoreticalPeak(CpuInfo("avx2 fma", "3000", 4, 2), "", 8)->tflops,
                   2 * 3e9 * 32 / 1e12);
  EXPECT_DOUBLE_EQ(CpuTheoreticalPeak(CpuInfo("avx2 fma", "3000", 4, 4), "", 1)->tflops,
                   3e9 * 32 / 1e12);
  // An Arm CPU's cpuinfo has Features, not x86 flags, and often no clock.
  EXPECT_FALSE(CpuTheoreticalPeak("processor\t: 0\nFeatures\t: fp asimd sve\n", "", 4));
  EXPECT_FALSE(CpuTheoreticalPeak(CpuInfo("sse2"), "", 2));
  EXPECT_FALSE(CpuTheoreticalPeak(CpuInfo("avx2 fma", "unknown"), "", 2));
}

TEST(ChoosePeak, TheSettingThenTheTheoreticalPeakThenTheProbe) {
  int probes = 0;
  auto probe = [&] { return ++probes, 0.03; };
  const PeakFlops cpu{0.33, "theory"};
  const PeakFlops set = ChoosePeak(2.5, cpu, probe);
  EXPECT_EQ(set.tflops, 2.5);
  EXPECT_EQ(set.source, "metrics.peak_tflops");
  EXPECT_EQ(ChoosePeak(0, cpu, probe).source, "theory");
  EXPECT_EQ(probes, 0) << "the probe runs only when nothing else tells the peak";
  const PeakFlops measured = ChoosePeak(0, std::nullopt, probe);
  EXPECT_EQ(measured.tflops, 0.03);
  EXPECT_EQ(probes, 1);
  EXPECT_EQ(measured.source, absl::StrCat("measured: the best of ", kPeakProbes,
                                          " f32 1024^3 matmuls after a warm-up (low on a busy "
                                          "machine; metrics.peak_tflops sets it)"));
}

// A rank on another device (a stand-in accelerator computing on the host) takes the GEMM
// ceiling measured on that device, in the matmuls' dtype; the setting still comes first.
TEST(RankPeak, OnAnotherDeviceIsTheMeasuredGemmCeilingUnlessSet) {
  testing_support::ScrambledDevice device;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    absl::StatusOr<PeakFlops> peak = RankPeak(0, &device, dtype, 64);
    ASSERT_TRUE(peak.ok()) << peak.status();
    EXPECT_GT(peak->tflops, 0);
    EXPECT_THAT(peak->source, HasSubstr(absl::StrCat("the best of 8 ", DTypeName(dtype),
                                                     " 64^3 GEMMs on the device")));
  }
  absl::StatusOr<PeakFlops> set = RankPeak(2.5, &device, DType::kBF16, 64);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->tflops, 2.5);
  EXPECT_EQ(set->source, "metrics.peak_tflops");
  EXPECT_EQ(MeasureDevicePeakTflops(device, DType::kI32, 64).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace titan
