#include "tools/gpu_proof/cuda_probe.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace titan::gpu_proof {
namespace {

// The few driver entry points used, with the driver API's C signatures (CUresult is an int,
// CUdevice an int).
using InitFn = int (*)(unsigned int);
using DriverGetVersionFn = int (*)(int*);
using DeviceGetCountFn = int (*)(int*);
using DeviceGetFn = int (*)(int*, int);
using DeviceGetNameFn = int (*)(char*, int, int);
using DeviceGetAttributeFn = int (*)(int*, int, int);

constexpr int kComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeCapabilityMinor = 76;

template <typename Fn>
Fn Symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

CudaProbe ProbeCuda(const std::string& library) {
  CudaProbe probe;
  // The handle is never closed: a driver does not unload cleanly, and the process is short.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    probe.note = absl::StrCat("cannot load ", library, ": ", error ? error : "unknown error");
    return probe;
  }
  auto init = Symbol<InitFn>(handle, "cuInit");
  auto driver_version = Symbol<DriverGetVersionFn>(handle, "cuDriverGetVersion");
  auto get_count = Symbol<DeviceGetCountFn>(handle, "cuDeviceGetCount");
  auto get_device = Symbol<DeviceGetFn>(handle, "cuDeviceGet");
  auto get_name = Symbol<DeviceGetNameFn>(handle, "cuDeviceGetName");
  auto get_attribute = Symbol<DeviceGetAttributeFn>(handle, "cuDeviceGetAttribute");
  if (!init || !driver_version || !get_count || !get_device || !get_name || !get_attribute) {
    probe.note = absl::StrCat(library, " lacks one of the driver functions cuInit, ",
                              "cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet, ",
                              "cuDeviceGetName, cuDeviceGetAttribute");
    return probe;
  }
  int version = 0;
  if (driver_version(&version) == 0) {
    probe.driver = absl::StrCat(version / 1000, ".", (version % 1000) / 10);
  }
  if (int error = init(0); error != 0) {
    probe.note = absl::StrCat("cuInit failed with CUresult ", error,
                              error == 100 ? " (no CUDA-capable device)" : "");
    return probe;
  }
  int count = 0;
  if (int error = get_count(&count); error != 0) {
    probe.note = absl::StrCat("cuDeviceGetCount failed with CUresult ", error);
    return probe;
  }
  for (int index = 0; index < count; ++index) {
    int device = 0, major = 0, minor = 0;
    char name[256] = {};
    if (get_device(&device, index) != 0 || get_name(name, sizeof name - 1, device) != 0 ||
        get_attribute(&major, kComputeCapabilityMajor, device) != 0 ||
        get_attribute(&minor, kComputeCapabilityMinor, device) != 0) {
      probe.note = absl::StrCat("the driver could not describe device ", index);
      continue;
    }
    probe.devices.push_back({name, absl::StrCat(major, ".", minor)});
  }
  if (count == 0) probe.note = "the driver shows no device (CUDA_VISIBLE_DEVICES?)";
  return probe;
}

}  // namespace titan::gpu_proof
