#include "plugins/comm/nccl/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace titan::nccl {

absl::Status CudaStatus(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("nccl plugin: ", call,
                                          " failed: ", cudaGetErrorName(error), ": ",
                                          cudaGetErrorString(error)));
}

}  // namespace titan::nccl
