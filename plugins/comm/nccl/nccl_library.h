// NCCL, loaded when a communicator is first made rather than linked: the plugin then builds
// wherever nccl.h is, its package needs no library outside Debian, and a machine without
// libnccl gets an error naming what to install instead of a plugin that fails to load.
#ifndef TITAN_PLUGINS_COMM_NCCL_NCCL_LIBRARY_H_
#define TITAN_PLUGINS_COMM_NCCL_NCCL_LIBRARY_H_

#include <nccl.h>

#include <string>

#include "titan/status.h"

namespace titan::nccl {

// The NCCL functions the plugin calls, named as in nccl.h without the prefix.
struct NcclLibrary {
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommFinalize) CommFinalize = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclGetLastError) GetLastError = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclBroadcast) Broadcast = nullptr;
  decltype(&::ncclSend) Send = nullptr;
  decltype(&::ncclRecv) Recv = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;
  std::string file;  // the library loaded, as the dynamic loader found it
};

// Loads libnccl.so.2 (the loader's search path, then /usr/local/cuda/lib64) once, saying on
// stderr which file it loaded; later calls return the same result.
absl::StatusOr<const NcclLibrary*> LoadNccl();
// The loaded library; only after LoadNccl succeeded.
const NcclLibrary& Nccl();

}  // namespace titan::nccl

#endif  // TITAN_PLUGINS_COMM_NCCL_NCCL_LIBRARY_H_
