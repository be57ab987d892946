#include "core/cpu/cpu_device.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_compute.h"
#include "core/runtime/memory_snapshot.h"

namespace titan {

CpuDevice& CpuDevice::Host() {
  static CpuDevice device;
  return device;
}

absl::Status CpuDevice::Select(int index) {
  if (index != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu device ", index, " does not exist; the CPU is device 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> CpuDevice::Allocate(size_t bytes) {
  size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  void* pointer = std::aligned_alloc(kAlignment, rounded);
  if (pointer == nullptr) {
    return WithSnapshot(
        absl::ResourceExhaustedError(absl::StrCat("cpu: cannot allocate ", bytes, " bytes")),
        MemoryTracker::Get().OnOutOfMemory(bytes, "cpu"));
  }
  // Buffers the plugins allocate (fsdp's shards, ...) have no tensor names: "(device)".
  if (MemoryTracker::Get().enabled()) MemoryTracker::Get().Add(pointer, bytes, "cpu", "(device)");
  size_t now = allocated_ += malloc_usable_size(pointer);
  size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  return pointer;
}

absl::Status CpuDevice::Free(void* pointer) {
  if (pointer != nullptr) {
    if (MemoryTracker::Get().enabled()) MemoryTracker::Get().Remove(pointer);
    allocated_ -= malloc_usable_size(pointer);
    std::free(pointer);
  }
  return absl::OkStatus();
}

absl::Status CpuDevice::CopyToDevice(void* device_dst, const void* host_src, size_t bytes) {
  std::memcpy(device_dst, host_src, bytes);
  return absl::OkStatus();
}

absl::Status CpuDevice::CopyToHost(void* host_dst, const void* device_src, size_t bytes) {
  std::memcpy(host_dst, device_src, bytes);
  return absl::OkStatus();
}

absl::Status CpuDevice::FillF32(float* device_dst, size_t count, float value) {
  std::fill(device_dst, device_dst + count, value);
  return absl::OkStatus();
}

Compute* CpuDevice::compute() { return &CpuCompute::Get(); }

absl::StatusOr<DeviceMemoryInfo> CpuDevice::MemoryInfo() {
  long page = sysconf(_SC_PAGESIZE);
  DeviceMemoryInfo info;
  info.total_bytes = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(page);
  info.free_bytes = static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(page);
  info.peak_allocated_bytes = peak_.load();
  return info;
}

}  // namespace titan
