#include "plugins/comm/nccl/group_launch.h"

#include "plugins/comm/nccl/nccl_library.h"

namespace titan::nccl {

ncclResult_t LaunchGroup(const std::vector<NcclMessage>& messages, ncclComm_t comm,
                         cudaStream_t stream) {
  const ncclResult_t opened = Nccl().GroupStart();
  if (opened != ncclSuccess) return opened;
  ncclResult_t failed = ncclSuccess;
  for (const NcclMessage& m : messages) {
    const ncclResult_t issued = m.send
                                    ? Nccl().Send(m.data, m.bytes, ncclUint8, m.peer, comm, stream)
                                    : Nccl().Recv(m.data, m.bytes, ncclUint8, m.peer, comm, stream);
    // A non-blocking communicator may answer ncclInProgress: the group's end settles it.
    if (issued != ncclSuccess && issued != ncclInProgress) {
      failed = issued;
      break;
    }
  }
  const ncclResult_t ended = Nccl().GroupEnd();
  return failed != ncclSuccess ? failed : ended;
}

}  // namespace titan::nccl
