#include "core/train/peak_flops.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "titan/compute.h"
#include "titan/float16.h"
#include "titan/splitmix64.h"

namespace titan {
namespace {

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

double MeasurePeakTflops(int n) {
  const int64_t kN = n;
  std::vector<float> a(kN * kN, 1.0f), b(kN * kN, 0.5f), c(kN * kN);
  auto product = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f, a.data(), kN, b.data(),
                kN, 0.0f, c.data(), kN);
  };
  // Not timed: the first products pay for page faults, starting the thread pool and the clock
  // ramping up.
  product();
  product();
  double best = 0;
  for (int rep = 0; rep < kPeakProbes; ++rep) {
    auto start = std::chrono::steady_clock::now();
    product();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * kN * kN * kN / std::max(s, 1e-9) / 1e12);
  }
  return best;
}

std::optional<PeakFlops> CpuTheoreticalPeak(absl::string_view cpuinfo, absl::string_view max_khz,
                                            int cores) {
  std::set<std::string> flags;
  std::set<std::pair<std::string, std::string>> physical;  // (physical id, core id)
  std::string package;
  double mhz = 0;
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    const std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, ':');
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    const absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    double v = 0;
    if (key == "flags" && flags.empty()) {
      for (absl::string_view flag : absl::StrSplit(value, ' ', absl::SkipEmpty())) {
        flags.emplace(flag);
      }
    } else if (key == "cpu MHz" && absl::SimpleAtod(value, &v)) {
      mhz = std::max(mhz, v);
    } else if (key == "physical id") {
      package = std::string(value);
    } else if (key == "core id") {
      physical.emplace(package, value);
    }
  }
  double khz = 0;
  std::string clock = "the fastest \"cpu MHz\" of /proc/cpuinfo";
  if (absl::SimpleAtod(absl::StripAsciiWhitespace(max_khz), &khz) && khz > 0) {
    mhz = khz / 1000;
    clock = "cpufreq's cpuinfo_max_freq";
  }
  // Two FMA units per core, each lane 2 FLOP a cycle; without FMA, one add and one multiply.
  int flop_per_cycle = 0;
  const char* unit = "";
  if (flags.count("avx512f") != 0) {
    flop_per_cycle = 2 * 16 * 2, unit = "AVX-512 FMA: 2 units x 16 f32 lanes x 2";
  } else if (flags.count("avx2") != 0 && flags.count("fma") != 0) {
    flop_per_cycle = 2 * 8 * 2, unit = "AVX2 FMA: 2 units x 8 f32 lanes x 2";
  } else if (flags.count("avx") != 0) {
    flop_per_cycle = 2 * 8, unit = "AVX: an add and a multiply of 8 f32 lanes";
  }
  if (flop_per_cycle == 0 || mhz <= 0 || cores < 1) return std::nullopt;
  if (!physical.empty()) cores = std::min<int>(cores, static_cast<int>(physical.size()));
  PeakFlops peak;
  peak.tflops = cores * mhz * 1e6 * flop_per_cycle / 1e12;
  peak.source = absl::StrFormat(
      "this CPU's theoretical f32 peak: %d core(s) x %.2f GHz (%s) x %d FLOP/cycle (%s)", cores,
      mhz / 1000, clock, flop_per_cycle, unit);
  return peak;
}

PeakFlops ChoosePeak(double configured, const std::optional<PeakFlops>& theoretical,
                     const std::function<double()>& probe) {
  if (configured > 0) return {configured, "metrics.peak_tflops"};
  if (theoretical.has_value()) return *theoretical;
  return {probe(), absl::StrFormat("measured: the best of %d f32 1024^3 matmuls after a warm-up "
                                   "(low on a busy machine; metrics.peak_tflops sets it)",
                                   kPeakProbes)};
}

PeakFlops ThisMachinePeak(double configured) {
  return ChoosePeak(
      configured,
      CpuTheoreticalPeak(ReadFile("/proc/cpuinfo"),
                         ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"),
                         omp_get_max_threads()),
      [] { return MeasurePeakTflops(); });
}

absl::StatusOr<double> MeasureDevicePeakTflops(DevicePlugin& device, DType dtype, int n) {
  Compute* compute = device.compute();
  if (compute == nullptr) return absl::FailedPreconditionError("the device has no compute");
  if (dtype != DType::kF32 && dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("MeasureDevicePeakTflops: ", DTypeName(dtype), " operands"));
  }
  const int64_t count = int64_t{n} * n;
  const size_t operand_bytes = count * DTypeSize(dtype);
  // Values in [-1, 1): the same on every device, and not the zeros a GPU multiplies faster.
  std::vector<char> host(operand_bytes);
  for (int64_t i = 0; i < count; ++i) {
    const float value = static_cast<float>(SplitMix64(i) >> 40) * 0x1.0p-23f - 1.0f;
    if (dtype == DType::kF32) {
      reinterpret_cast<float*>(host.data())[i] = value;
    } else {
      reinterpret_cast<uint16_t*>(host.data())[i] = F32ToBf16(value);
    }
  }
  std::vector<void*> buffers;
  auto release = [&] {
    for (void* buffer : buffers) device.Free(buffer).IgnoreError();
  };
  const Device where{device.type(), 0};
  std::vector<TensorView> views;
  for (auto [bytes, type] : {std::pair{operand_bytes, dtype}, std::pair{operand_bytes, dtype},
                             std::pair{count * sizeof(float), DType::kF32}}) {
    absl::StatusOr<void*> buffer = device.Allocate(bytes);
    if (!buffer.ok()) {
      release();
      return buffer.status();
    }
    buffers.push_back(*buffer);
    views.push_back(TensorView{*buffer, type, where, {n, n}, {}});
  }
  absl::Status status;
  for (int i = 0; i < 2 && status.ok(); ++i) {
    status = device.CopyToDevice(buffers[i], host.data(), operand_bytes);
  }
  auto product = [&] {
    return compute->Gemm(views[0], false, views[1], false, 1.0f, 0.0f, views[2]);
  };
  // Not timed: the first products pick the GEMM's algorithm and raise the clocks.
  for (int i = 0; i < 2 && status.ok(); ++i) status = product();
  if (status.ok()) status = compute->Synchronize();
  double best = 0;
  for (int rep = 0; rep < kPeakProbes && status.ok(); ++rep) {
    const auto start = std::chrono::steady_clock::now();
    status = product();
    if (status.ok()) status = compute->Synchronize();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * count * n / std::max(s, 1e-9) / 1e12);
  }
  release();
  if (!status.ok()) return status;
  return best;
}

absl::StatusOr<PeakFlops> RankPeak(double configured, DevicePlugin* device, DType matmul_dtype,
                                   int n) {
  if (configured > 0 || device == nullptr || device->type() == DeviceType::kCpu) {
    return ThisMachinePeak(configured);
  }
  absl::StatusOr<double> measured = MeasureDevicePeakTflops(*device, matmul_dtype, n);
  if (!measured.ok()) {
    return absl::Status(
        measured.status().code(),
        absl::StrCat("measuring the device's peak for MFU: ", measured.status().message(),
                     " (metrics.peak_tflops sets the peak instead)"));
  }
  return PeakFlops{*measured, absl::StrFormat("measured: the best of %d %s %d^3 GEMMs on the "
                                              "device after two untimed (metrics.peak_tflops "
                                              "sets another, such as the datasheet's)",
                                              kPeakProbes, DTypeName(matmul_dtype), n)};
}

}  // namespace titan
