#include "cuda_library_loader.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace titan::cuda {

absl::StatusOr<void*> OpenCudaLibrary(const std::string& soname, const char* what,
                                      const char* needed_by, const char* hint, std::string& file) {
  std::string errors;
  void* library = nullptr;
  for (const std::string& path : {soname, absl::StrCat("/usr/local/cuda/lib64/", soname)}) {
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", dlerror());
  }
  if (library == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("cuda: cannot load ", what, ", which ",
                                                      needed_by, " need (", errors, "); ", hint));
  }
  struct link_map* map = nullptr;
  file = dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr ? map->l_name : soname;
  std::fprintf(stderr, "cuda: %s from %s\n", what, file.c_str());
  return library;
}

absl::Status BindCudaFunction(void* library, const char* what, const char* name, void** function) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda: ", what, " lacks ", name, " (", dlerror(), ")"));
  }
  *function = symbol;
  return absl::OkStatus();
}

}  // namespace titan::cuda
