// A stand-in for the CUDA driver (libcuda.so.1) for cuda_probe_test: the devices it shows and
// cuInit's result come from the environment, so the probe's handling of each can be tested
// on a machine without a GPU.
#include <cstdio>
#include <cstdlib>

namespace {

int FromEnvironment(const char* name, int otherwise) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : otherwise;
}

}  // namespace

extern "C" {

int cuInit(unsigned int) { return FromEnvironment("TITAN_FAKE_CUDA_INIT_ERROR", 0); }

int cuDriverGetVersion(int* version) {
  *version = 13000;
  return 0;
}

int cuDeviceGetCount(int* count) {
  *count = FromEnvironment("TITAN_FAKE_CUDA_DEVICES", 1);
  return 0;
}

int cuDeviceGet(int* device, int index) {
  *device = index;
  return 0;
}

int cuDeviceGetName(char* name, int length, int device) {
  std::snprintf(name, length, "NVIDIA H200 #%d", device);
  return 0;
}

int cuDeviceGetAttribute(int* value, int attribute, int) {
  *value = attribute == 75 ? 9 : (attribute == 76 ? 0 : -1);
  return 0;
}

}  // extern "C"
