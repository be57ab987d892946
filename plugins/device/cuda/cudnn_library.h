// cuDNN, loaded when the first attention that may use it runs rather than linked, as cuBLASLt is
// (cublaslt_library.h): titan calls only its backend (graph) API, for fused attention
// (cudnn_sdpa.h). A machine without cuDNN loads the plugin all the same; its attention runs in
// titan's own kernels and the log says why.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_CUDNN_LIBRARY_H_
#define TITAN_PLUGINS_DEVICE_CUDA_CUDNN_LIBRARY_H_

#include <cudnn_backend.h>
#include <cudnn_graph.h>

#include <cstddef>
#include <string>

#include "titan/status.h"

namespace titan::cuda {

// clang-format off
#define TITAN_CUDNN_FUNCTIONS(X)                                                   \
  X(GetVersion) X(GetErrorString) X(GetLastErrorString)                            \
  X(Create) X(Destroy) X(SetStream)                                                \
  X(BackendCreateDescriptor) X(BackendDestroyDescriptor) X(BackendSetAttribute)    \
  X(BackendGetAttribute) X(BackendFinalize) X(BackendExecute)
// clang-format on

// The functions titan calls, each named as cuDNN's without the `cudnn` prefix.
struct Cudnn {
#define TITAN_CUDNN_FIELD(name) decltype(&cudnn##name) name = nullptr;
  TITAN_CUDNN_FUNCTIONS(TITAN_CUDNN_FIELD)
#undef TITAN_CUDNN_FIELD
  std::string file;    // the library loaded, as the dynamic loader found it
  size_t version = 0;  // cudnnGetVersion(): major * 10000 + minor * 100 + patch
};

// Loads libcudnn.so.<major of the headers built against> once, from the loader's path (where
// tools/gpu-check puts the NVIDIA wheels' folders) or /usr/local/cuda/lib64, and says on stderr
// which file it loaded; the error names what was tried and why it failed.
absl::StatusOr<const Cudnn*> LoadCudnn();

// "CUDNN_STATUS_...: <cuDNN's last error message>" for a status cuDNN returned.
std::string CudnnStatusText(const Cudnn& cudnn, cudnnStatus_t status);

// "9.10.2" from cudnnGetVersion()'s 91002.
std::string CudnnVersionText(size_t version);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_CUDNN_LIBRARY_H_
