// `comm` plugins provide the job's world communicator (mpi, nccl).
#ifndef TITAN_COMM_H_
#define TITAN_COMM_H_

#include <memory>
#include <string>

#include "titan/communicator.h"
#include "titan/device.h"
#include "titan/plugin.h"
#include "titan/trace.h"

namespace titan {

// What the job tells its comm plugin when joining.
struct JoinOptions {
  std::string dump_folder;  // job.dump_folder: diagnostics such as flight records go under it
  // Receives each collective as a span while a step is profiled; null when profiling is off.
  TraceSink* trace = nullptr;
  // The device this rank computes on (null: the CPU). A device communicator (nccl) enqueues on
  // its compute's stream; a host communicator (mpi) stages this device's buffers through host
  // memory it allocates with AllocateHost.
  DevicePlugin* device = nullptr;
};

class CommPlugin : public Plugin {
 public:
  // Joins the job: every launched rank calls this once.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> ConnectWorld(
      const JoinOptions& options) = 0;
};

template <>
struct PluginKind<CommPlugin> {
  static constexpr const char* kName = "comm";
};

}  // namespace titan

#endif  // TITAN_COMM_H_
