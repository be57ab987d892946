// cuBLASLt, and cuBLAS for its grouped GEMM, each loaded when the first GEMM needs it rather than
// linked: the plugin then needs only the driver to load (as its packages promise), and a machine
// without cuBLAS gets an error naming the library at first use instead of a plugin that fails to
// load.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_CUBLASLT_LIBRARY_H_
#define TITAN_PLUGINS_DEVICE_CUDA_CUBLASLT_LIBRARY_H_

#include <cublasLt.h>
#include <cublas_api.h>

#include <string>

#include "titan/status.h"

namespace titan::cuda {

// clang-format off
#define TITAN_CUBLASLT_FUNCTIONS(X)                                    \
  X(Create) X(Destroy) X(GetStatusName) X(GetStatusString)             \
  X(MatmulDescCreate) X(MatmulDescDestroy) X(MatmulDescSetAttribute)   \
  X(MatrixLayoutCreate) X(MatrixLayoutDestroy)                         \
  X(MatmulPreferenceCreate) X(MatmulPreferenceDestroy)                 \
  X(MatmulPreferenceSetAttribute) X(MatmulAlgoGetHeuristic) X(Matmul)
// clang-format on

// The functions titan calls, each named as cuBLASLt's without the `cublasLt` prefix.
struct CublasLt {
#define TITAN_CUBLASLT_FIELD(name) decltype(&cublasLt##name) name = nullptr;
  TITAN_CUBLASLT_FUNCTIONS(TITAN_CUBLASLT_FIELD)
#undef TITAN_CUBLASLT_FIELD
  std::string file;  // the library loaded, as the dynamic loader found it
};

// Loads libcublasLt.so.<major of the headers built against> once, from the loader's path or
// /usr/local/cuda/lib64, and says on stderr which file it loaded (a machine may hold several);
// the error names what was tried and why it failed.
absl::StatusOr<const CublasLt*> LoadCublasLt();

// clang-format off
#define TITAN_CUBLAS_FUNCTIONS(X) \
  X(Create_v2) X(Destroy_v2) X(SetStream_v2) X(GemmGroupedBatchedEx_64)
// clang-format on

// The cuBLAS functions titan calls (its grouped GEMM, which cuBLASLt lacks), named without the
// `cublas` prefix.
struct Cublas {
#define TITAN_CUBLAS_FIELD(name) decltype(&cublas##name) name = nullptr;
  TITAN_CUBLAS_FUNCTIONS(TITAN_CUBLAS_FIELD)
#undef TITAN_CUBLAS_FIELD
  std::string file;
};

// Loads libcublas.so.<major> once, as LoadCublasLt loads cuBLASLt.
absl::StatusOr<const Cublas*> LoadCublas();

// "CUBLAS_STATUS_...: message" for a status cuBLASLt returned.
std::string CublasStatusText(cublasStatus_t status);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_CUBLASLT_LIBRARY_H_
