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

// What the core asks of a comm plugin to choose it and to check a job against it; the defaults
// describe a host communicator (mpi).
struct CommTraits {
  // Joins a job of many ranks; false for a communicator of one process alone.
  bool joins_many_ranks = true;
  // Moves buffers of any device, staging device memory through the host, so ranks may share a
  // device and the CPU device works; false: device memory only, one device per rank.
  bool stages_through_host = true;
  // Point-to-point sends and receives progress whatever their issue order, so a pipeline
  // schedule's sends and receives in both directions never wait on each other (NCCL's block in
  // issue order on one stream).
  bool unordered_point_to_point = true;
};

class CommPlugin : public Plugin {
 public:
  virtual CommTraits traits() const { return {}; }

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
