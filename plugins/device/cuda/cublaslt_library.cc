#include "cublaslt_library.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace titan::cuda {
namespace {

template <typename Function>
absl::Status Bind(void* library, const char* what, const char* name, Function* function) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda: ", what, " lacks ", name, " (", dlerror(), ")"));
  }
  *function = reinterpret_cast<Function>(symbol);
  return absl::OkStatus();
}

// dlopens lib<stem>.so.<cuBLAS major> from the loader's path or /usr/local/cuda/lib64 and says on
// stderr which file it loaded; `file` receives its path.
absl::StatusOr<void*> Open(const char* stem, const char* what, const char* needed_by,
                           std::string& file) {
  const std::string name = absl::StrCat("lib", stem, ".so.", CUBLAS_VER_MAJOR);
  std::string errors;
  void* library = nullptr;
  for (const std::string& path : {name, absl::StrCat("/usr/local/cuda/lib64/", name)}) {
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", dlerror());
  }
  if (library == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda: cannot load ", what, ", which ", needed_by, " need (", errors,
                     "); install the CUDA toolkit's cuBLAS or put its folder on LD_LIBRARY_PATH"));
  }
  struct link_map* map = nullptr;
  file = dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr ? map->l_name : name;
  std::fprintf(stderr, "cuda: %s from %s\n", what, file.c_str());
  return library;  // stays loaded until the process exits, as the plugin does
}

absl::StatusOr<CublasLt> LoadLt() {
  CublasLt lt;
  TITAN_ASSIGN_OR_RETURN(void* library, Open("cublasLt", "cuBLASLt", "the GEMMs", lt.file));
#define TITAN_CUBLASLT_BIND(name) \
  TITAN_RETURN_IF_ERROR(Bind(library, "cuBLASLt", "cublasLt" #name, &lt.name));
  TITAN_CUBLASLT_FUNCTIONS(TITAN_CUBLASLT_BIND)
#undef TITAN_CUBLASLT_BIND
  return lt;
}

absl::StatusOr<Cublas> LoadBlas() {
  Cublas blas;
  TITAN_ASSIGN_OR_RETURN(void* library, Open("cublas", "cuBLAS", "the grouped GEMMs", blas.file));
#define TITAN_CUBLAS_BIND(name) \
  TITAN_RETURN_IF_ERROR(Bind(library, "cuBLAS", "cublas" #name, &blas.name));
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
