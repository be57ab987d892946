#include "plugins/comm/nccl/nccl_library.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace titan::nccl {
namespace {

NcclLibrary library;

absl::StatusOr<const NcclLibrary*> Load() {
  std::string errors;
  void* handle = nullptr;
  for (const char* name : {"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"}) {
    handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", dlerror());
  }
  if (handle == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("comm.backend = \"nccl\": cannot load NCCL (", errors,
                     "); install NCCL 2 or put the folder of libnccl.so.2 on LD_LIBRARY_PATH"));
  }
  std::string missing;
  auto bind = [&](auto& function, const char* symbol) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(handle, symbol));
    if (function == nullptr) absl::StrAppend(&missing, missing.empty() ? "" : ", ", symbol);
  };
  bind(library.GetUniqueId, "ncclGetUniqueId");
  bind(library.CommInitRankConfig, "ncclCommInitRankConfig");
  bind(library.CommGetAsyncError, "ncclCommGetAsyncError");
  bind(library.CommAbort, "ncclCommAbort");
  bind(library.CommFinalize, "ncclCommFinalize");
  bind(library.CommDestroy, "ncclCommDestroy");
  bind(library.GetErrorString, "ncclGetErrorString");
  bind(library.GetLastError, "ncclGetLastError");
  bind(library.AllReduce, "ncclAllReduce");
  bind(library.ReduceScatter, "ncclReduceScatter");
  bind(library.AllGather, "ncclAllGather");
  bind(library.Broadcast, "ncclBroadcast");
  bind(library.Send, "ncclSend");
  bind(library.Recv, "ncclRecv");
  bind(library.GroupStart, "ncclGroupStart");
  bind(library.GroupEnd, "ncclGroupEnd");
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("comm.backend = \"nccl\": the libnccl.so.2 found lacks ", missing,
                     "; titan needs NCCL 2.18 or later"));
  }
  struct link_map* map = nullptr;
  library.file =
      dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr ? map->l_name : "libnccl.so.2";
  std::fprintf(stderr, "nccl: NCCL from %s\n", library.file.c_str());
  return &library;
}

}  // namespace

absl::StatusOr<const NcclLibrary*> LoadNccl() {
  static const absl::StatusOr<const NcclLibrary*> loaded = Load();
  return loaded;
}

const NcclLibrary& Nccl() { return library; }

}  // namespace titan::nccl
