#ifndef TITAN_CORE_CPU_CPU_DEVICE_H_
#define TITAN_CORE_CPU_CPU_DEVICE_H_

#include <atomic>
#include <cstddef>

#include "titan/device.h"

namespace titan {

// Host memory, 64-byte aligned so vector kernels never straddle a cache line.
class CpuDevice : public DevicePlugin {
 public:
  static constexpr size_t kAlignment = 64;
  // The process's CPU device, for code that computes on the CPU without a recipe (tests, tools).
  static CpuDevice& Host();

  DeviceType type() const override { return DeviceType::kCpu; }
  int DeviceCount() const override { return 1; }
  absl::Status Select(int index) override;
  absl::StatusOr<void*> Allocate(size_t bytes) override;
  absl::Status Free(void* pointer) override;
  absl::Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) override;
  absl::Status FillF32(float* device_dst, size_t count, float value) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
  absl::StatusOr<DeviceMemoryInfo> MemoryInfo() override;
  Compute* compute() override;

 private:
  std::atomic<size_t> allocated_{0};
  std::atomic<size_t> peak_{0};
};

}  // namespace titan

#endif  // TITAN_CORE_CPU_CPU_DEVICE_H_
