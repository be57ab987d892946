#include "cudnn_library.h"

#include "absl/strings/str_cat.h"
#include "cuda_library_loader.h"

namespace titan::cuda {
namespace {

absl::StatusOr<Cudnn> Load() {
  Cudnn cudnn;
  TITAN_ASSIGN_OR_RETURN(
      void* library,
      OpenCudaLibrary(absl::StrCat("libcudnn.so.", CUDNN_MAJOR), "cuDNN", "the fused attention",
                      "install cuDNN 9 (the nvidia-cudnn-cu12/cu13 wheel or NVIDIA's package) or "
                      "put its folder on LD_LIBRARY_PATH",
                      cudnn.file));
#define TITAN_CUDNN_BIND(name) \
  TITAN_RETURN_IF_ERROR(BindCudaFunction(library, "cuDNN", "cudnn" #name, &cudnn.name));
  TITAN_CUDNN_FUNCTIONS(TITAN_CUDNN_BIND)
#undef TITAN_CUDNN_BIND
  cudnn.version = cudnn.GetVersion();
  if (cudnn.version / 10000 != CUDNN_MAJOR) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda: ", cudnn.file, " is cuDNN ", CudnnVersionText(cudnn.version),
                     "; the plugin was built against cuDNN ", CUDNN_MAJOR, ".x"));
  }
  return cudnn;
}

}  // namespace

absl::StatusOr<const Cudnn*> LoadCudnn() {
  static const absl::StatusOr<Cudnn>* loaded = new absl::StatusOr<Cudnn>(Load());
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

std::string CudnnStatusText(const Cudnn& cudnn, cudnnStatus_t status) {
  char message[1024] = {};
  cudnn.GetLastErrorString(message, sizeof(message));
  return absl::StrCat(cudnn.GetErrorString(status), message[0] != '\0' ? ": " : "", message);
}

std::string CudnnVersionText(size_t version) {
  return absl::StrCat(version / 10000, ".", version / 100 % 100, ".", version % 100);
}

}  // namespace titan::cuda
