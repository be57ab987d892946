#include "cublaslt_library.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace titan::cuda {
namespace {

template <typename Function>
absl::Status Bind(void* library, const char* name, Function* function) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda: cuBLASLt lacks ", name, " (", dlerror(), ")"));
  }
  *function = reinterpret_cast<Function>(symbol);
  return absl::OkStatus();
}

absl::StatusOr<CublasLt> Load() {
  const std::string file = absl::StrCat("libcublasLt.so.", CUBLAS_VER_MAJOR);
  std::string errors;
  void* library = nullptr;
  for (const std::string& path : {file, absl::StrCat("/usr/local/cuda/lib64/", file)}) {
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", dlerror());
  }
  if (library == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda: cannot load cuBLASLt, which the GEMMs need (", errors,
                     "); install the CUDA toolkit's cuBLAS or put its folder on LD_LIBRARY_PATH"));
  }
  CublasLt lt;
  struct link_map* map = nullptr;
  lt.file = dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr ? map->l_name : file;
  std::fprintf(stderr, "cuda: cuBLASLt from %s\n", lt.file.c_str());
#define TITAN_CUBLASLT_BIND(name) TITAN_RETURN_IF_ERROR(Bind(library, "cublasLt" #name, &lt.name));
  TITAN_CUBLASLT_FUNCTIONS(TITAN_CUBLASLT_BIND)
#undef TITAN_CUBLASLT_BIND
  return lt;  // the library stays loaded until the process exits, as the plugin does
}

}  // namespace

absl::StatusOr<const CublasLt*> LoadCublasLt() {
  static const absl::StatusOr<CublasLt>* loaded = new absl::StatusOr<CublasLt>(Load());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

std::string CublasStatusText(cublasStatus_t status) {
  absl::StatusOr<const CublasLt*> lt = LoadCublasLt();
  if (!lt.ok()) return absl::StrCat("cuBLAS status ", static_cast<int>(status));
  return absl::StrCat((*lt)->GetStatusName(status), ": ", (*lt)->GetStatusString(status));
}

}  // namespace titan::cuda
