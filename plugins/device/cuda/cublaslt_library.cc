#include "cublaslt_library.h"

#include "absl/strings/str_cat.h"
#include "cuda_library_loader.h"

namespace titan::cuda {
namespace {

constexpr char kCublasHint[] =
    "install the CUDA toolkit's cuBLAS or put its folder on LD_LIBRARY_PATH";

// lib<stem>.so.<the cuBLAS major of the headers built against>.
std::string Soname(const char* stem) { return absl::StrCat("lib", stem, ".so.", CUBLAS_VER_MAJOR); }

absl::StatusOr<CublasLt> LoadLt() {
  CublasLt lt;
  TITAN_ASSIGN_OR_RETURN(void* library, OpenCudaLibrary(Soname("cublasLt"), "cuBLASLt", "the GEMMs",
                                                        kCublasHint, lt.file));
#define TITAN_CUBLASLT_BIND(name) \
  TITAN_RETURN_IF_ERROR(BindCudaFunction(library, "cuBLASLt", "cublasLt" #name, &lt.name));
  TITAN_CUBLASLT_FUNCTIONS(TITAN_CUBLASLT_BIND)
#undef TITAN_CUBLASLT_BIND
  return lt;
}

absl::StatusOr<Cublas> LoadBlas() {
  Cublas blas;
  TITAN_ASSIGN_OR_RETURN(
      void* library,
      OpenCudaLibrary(Soname("cublas"), "cuBLAS", "the grouped GEMMs", kCublasHint, blas.file));
#define TITAN_CUBLAS_BIND(name) \
  TITAN_RETURN_IF_ERROR(BindCudaFunction(library, "cuBLAS", "cublas" #name, &blas.name));
  TITAN_CUBLAS_FUNCTIONS(TITAN_CUBLAS_BIND)
#undef TITAN_CUBLAS_BIND
  return blas;
}

}  // namespace

absl::StatusOr<const CublasLt*> LoadCublasLt() {
  static const absl::StatusOr<CublasLt>* loaded = new absl::StatusOr<CublasLt>(LoadLt());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

absl::StatusOr<const Cublas*> LoadCublas() {
  static const absl::StatusOr<Cublas>* loaded = new absl::StatusOr<Cublas>(LoadBlas());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

std::string CublasStatusText(cublasStatus_t status) {
  absl::StatusOr<const CublasLt*> lt = LoadCublasLt();
  if (!lt.ok()) return absl::StrCat("cuBLAS status ", static_cast<int>(status));
  return absl::StrCat((*lt)->GetStatusName(status), ": ", (*lt)->GetStatusString(status));
}

}  // namespace titan::cuda
