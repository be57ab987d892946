// dlopen of the CUDA libraries the plugin loads at first use rather than links (cuBLASLt, cuBLAS,
// cuDNN): the plugin then needs only the driver to load, and a machine without one of them gets
// an error naming the library when it is first needed.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_CUDA_LIBRARY_LOADER_H_
#define TITAN_PLUGINS_DEVICE_CUDA_CUDA_LIBRARY_LOADER_H_

#include <string>

#include "titan/status.h"

namespace titan::cuda {

// dlopens `soname` (libX.so.<major>) from the loader's path or /usr/local/cuda/lib64 and says on
// stderr which file it loaded (a machine may hold several); `file` receives its path. The
// library stays loaded until the process exits, as the plugin does. The error names what was
// tried, why it failed and `hint` (how to install it).
absl::StatusOr<void*> OpenCudaLibrary(const std::string& soname, const char* what,
                                      const char* needed_by, const char* hint, std::string& file);

// Looks up `name` in `library` (opened by OpenCudaLibrary) into *function.
absl::Status BindCudaFunction(void* library, const char* what, const char* name, void** function);

template <typename Function>
absl::Status BindCudaFunction(void* library, const char* what, const char* name,
                              Function* function) {
  void* symbol = nullptr;
  TITAN_RETURN_IF_ERROR(BindCudaFunction(library, what, name, &symbol));
  *function = reinterpret_cast<Function>(symbol);
  return absl::OkStatus();
}

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_CUDA_LIBRARY_LOADER_H_
