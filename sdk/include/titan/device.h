// `device` plugins own memory and streams on an accelerator (cuda). The CPU device is built
// into the core.
#ifndef TITAN_DEVICE_H_
#define TITAN_DEVICE_H_

#include <cstddef>

#include "titan/plugin.h"
#include "titan/tensor_view.h"

namespace titan {

struct DeviceMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  size_t peak_allocated_bytes = 0;
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
};

template <>
struct PluginKind<DevicePlugin> {
  static constexpr const char* kName = "device";
};

}  // namespace titan

#endif  // TITAN_DEVICE_H_
