// CUDA runtime errors as Status, for the nccl plugin's files.
#ifndef TITAN_PLUGINS_COMM_NCCL_CUDA_STATUS_H_
#define TITAN_PLUGINS_COMM_NCCL_CUDA_STATUS_H_

#include <cuda_runtime.h>

#include "titan/status.h"

namespace titan::nccl {

// "nccl plugin: <call> failed: <cudaGetErrorName>: <cudaGetErrorString>", ok for cudaSuccess.
absl::Status CudaStatus(cudaError_t error, const char* call);

}  // namespace titan::nccl

#endif  // TITAN_PLUGINS_COMM_NCCL_CUDA_STATUS_H_
