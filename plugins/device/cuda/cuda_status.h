// CUDA and cuBLAS(Lt) results as Status values naming the call and the library's own message,
// so a machine without a GPU, or a failed kernel, gets an explanation rather than a crash.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_CUDA_STATUS_H_
#define TITAN_PLUGINS_DEVICE_CUDA_CUDA_STATUS_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "absl/strings/str_cat.h"
#include "cublaslt_library.h"
#include "titan/status.h"

namespace titan::cuda {

inline absl::Status Check(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();  // a launch error is sticky until read; the Status now carries it
  auto code = error == cudaErrorMemoryAllocation ? absl::StatusCode::kResourceExhausted
                                                 : absl::StatusCode::kFailedPrecondition;
  return absl::Status(code, absl::StrCat("cuda: ", call, " failed: ", cudaGetErrorName(error), ": ",
                                         cudaGetErrorString(error)));
}

inline absl::Status CheckCublas(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("cuda: ", call, " failed: ", CublasStatusText(status)));
}

// cudaMalloc's error, with the size asked for and what it was for.
inline absl::Status CheckAllocation(cudaError_t error, const char* what, size_t bytes) {
  if (error == cudaSuccess) return absl::OkStatus();
  absl::Status status = Check(error, "cudaMalloc");
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), " (", what, ": ", bytes, " bytes asked for)"));
}

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_CUDA_STATUS_H_
