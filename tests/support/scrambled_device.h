// A stand-in accelerator for CPU-only tests of device staging (checkpoints, the mpi
// communicator): its memory is host memory holding every byte XOR kScramble, its type is kCuda,
// and only its copies (DevicePlugin's and Compute's) unscramble. Code that reads "device" bytes
// in place instead of copying them through the device sees scrambled values, so a test fails.
#ifndef TITAN_TESTS_SUPPORT_SCRAMBLED_DEVICE_H_
#define TITAN_TESTS_SUPPORT_SCRAMBLED_DEVICE_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cpu/cpu_compute.h"
#include "titan/device.h"

namespace titan::testing_support {

inline constexpr unsigned char kScramble = 0x5a;

inline void XorCopy(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < bytes; ++i) d[i] = static_cast<unsigned char>(s[i] ^ kScramble);
}

class ScrambledCompute : public CpuCompute {
 public:
  Device device() const override { return Device{DeviceType::kCuda, 0}; }
  int copies = 0;  // how many copies crossed the host/device line

 private:
  // The compute interface has checked that the views are on this (cuda) device.
  absl::Status RunCopyToHost(const TensorView& src, void* host_dst) override {
    XorCopy(host_dst, src.data, src.nbytes());
    ++copies;
    return absl::OkStatus();
  }
  absl::Status RunCopyFromHost(const void* host_src, TensorView dst) override {
    XorCopy(dst.data, host_src, dst.nbytes());
    ++copies;
    return absl::OkStatus();
  }
};

class ScrambledDevice : public DevicePlugin {
 public:
  DeviceType type() const override { return DeviceType::kCuda; }
  int DeviceCount() const override { return 1; }
  absl::Status Select(int) override { return absl::OkStatus(); }
  absl::StatusOr<void*> Allocate(size_t bytes) override { return ::operator new(bytes); }
  absl::Status Free(void* pointer) override {
    ::operator delete(pointer);
    return absl::OkStatus();
  }
  absl::Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) override {
    XorCopy(device_dst, host_src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) override {
    XorCopy(host_dst, device_src, bytes);
    return absl::OkStatus();
  }
  absl::Status FillF32(float* device_dst, size_t count, float value) override {
    std::vector<float> values(count, value);
    return CopyToDevice(device_dst, values.data(), count * sizeof(float));
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  absl::StatusOr<DeviceMemoryInfo> MemoryInfo() override { return DeviceMemoryInfo{}; }
  Compute* compute() override { return &compute_; }
  absl::StatusOr<void*> AllocateHost(size_t bytes) override {
    ++host_allocations;
    return DevicePlugin::AllocateHost(bytes);
  }

  ScrambledCompute& scrambled_compute() { return compute_; }
  int host_allocations = 0;

 private:
  ScrambledCompute compute_;
};

// `values` as the device would hold them, and back.
template <typename T>
std::vector<T> Scrambled(const std::vector<T>& values) {
  std::vector<T> out(values.size());
  XorCopy(out.data(), values.data(), values.size() * sizeof(T));
  return out;
}

}  // namespace titan::testing_support

#endif  // TITAN_TESTS_SUPPORT_SCRAMBLED_DEVICE_H_
