// `device` plugins own memory, streams and the compute kernels of an accelerator (cuda). The CPU
// device is built into the core.
#ifndef TITAN_DEVICE_H_
#define TITAN_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include "titan/compute.h"
#include "titan/plugin.h"
#include "titan/tensor_view.h"

namespace titan {

struct DeviceMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  size_t peak_allocated_bytes = 0;  // the most bytes this process's tensors held at once
  // The most bytes this process held from the device at once: allocated plus what an allocator
  // keeps cached; equal to peak_allocated_bytes for a device that allocates directly.
  size_t peak_reserved_bytes = 0;
};

class DevicePlugin : public Plugin {
 public:
  virtual DeviceType type() const = 0;
  // How many devices of this type this process can use; 0 when none is present.
  virtual int DeviceCount() const = 0;
  // Makes `index` the current device of the calling thread.
  virtual absl::Status Select(int index) = 0;
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual absl::Status Free(void* pointer) = 0;
  virtual absl::Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) = 0;
  // Sets `count` f32 elements at `device_dst` to `value`.
  virtual absl::Status FillF32(float* device_dst, size_t count, float value) = 0;
  virtual absl::Status Synchronize() = 0;
  virtual absl::StatusOr<DeviceMemoryInfo> MemoryInfo() = 0;
  // The kernels of the selected device (titan/compute.h); null for a device that only allocates
  // and copies, which titan-run refuses to train on, naming the device.
  virtual Compute* compute() { return nullptr; }
  // Host memory for staging this device's buffers: page-locked where the device has such
  // memory (faster copies), plain host memory otherwise. Free it with FreeHost.
  virtual absl::StatusOr<void*> AllocateHost(size_t bytes) {
    void* pointer = ::operator new(bytes > 0 ? bytes : 1, std::nothrow);
    if (pointer == nullptr) {
      return absl::ResourceExhaustedError("AllocateHost: out of host memory");
    }
    return pointer;
  }
  virtual absl::Status FreeHost(void* pointer) {
    ::operator delete(pointer);
    return absl::OkStatus();
  }
};

// Memory on a device, zero-filled, returned to it when the buffer goes. Move-only; the device
// plugin must outlive it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static absl::StatusOr<DeviceBuffer> Allocate(DevicePlugin& device, int64_t floats) {
    DeviceBuffer buffer;
    const size_t bytes = static_cast<size_t>(floats > 0 ? floats : 1) * sizeof(float);
    TITAN_ASSIGN_OR_RETURN(buffer.data_, device.Allocate(bytes));
    buffer.device_ = &device;
    buffer.floats_ = floats;
    TITAN_RETURN_IF_ERROR(device.FillF32(buffer.f32(), bytes / sizeof(float), 0.0f));
    return buffer;
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(data_, other.data_);
    std::swap(floats_, other.floats_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (device_ != nullptr) device_->Free(data_).IgnoreError();  // nothing to report it to
  }

  float* f32() const { return static_cast<float*>(data_); }
  int64_t size() const { return floats_; }  // in floats
  // `count` floats from `offset` on (all of them by default), tagged with the device.
  TensorView view(int64_t offset = 0, int64_t count = -1) const {
    return TensorView{f32() + offset,
                      DType::kF32,
                      Device{device_->type(), 0},
                      {count < 0 ? floats_ - offset : count},
                      {}};
  }

 private:
  DevicePlugin* device_ = nullptr;
  void* data_ = nullptr;
  int64_t floats_ = 0;
};

template <>
struct PluginKind<DevicePlugin> {
  static constexpr const char* kName = "device";
};

}  // namespace titan

#endif  // TITAN_DEVICE_H_
