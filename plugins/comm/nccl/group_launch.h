// One grouped exchange as NCCL calls: its sends and receives between ncclGroupStart and
// ncclGroupEnd, so that NCCL runs them as one operation and two ranks sending to each other at
// once do not wait on each other's order. Apart from the communicator so that a fake NCCL can
// check the calls without a GPU (group_launch_test.cc).
#ifndef TITAN_PLUGINS_COMM_NCCL_GROUP_LAUNCH_H_
#define TITAN_PLUGINS_COMM_NCCL_GROUP_LAUNCH_H_

#include <nccl.h>

#include <cstddef>
#include <vector>

namespace titan::nccl {

struct NcclMessage {
  bool send = false;
  void* data = nullptr;
  size_t bytes = 0;
  int peer = 0;
};

// Opens one group, issues the messages in order (bytes as ncclUint8), and closes the group
// even after a call failed, as NCCL requires. Returns the first failure, else ncclGroupEnd's
// answer (ncclInProgress on a non-blocking communicator until the group is queued).
ncclResult_t LaunchGroup(const std::vector<NcclMessage>& messages, ncclComm_t comm,
                         cudaStream_t stream);

}  // namespace titan::nccl

#endif  // TITAN_PLUGINS_COMM_NCCL_GROUP_LAUNCH_H_
