#include "plugins/parallel/cp/ring_pass.h"

#include <utility>

namespace titan::cp {

absl::Status PassAround(Communicator& group, const TensorView& send, const TensorView& receive,
                        int tag, Transfers& transfers) {
  const int cp = group.size(), r = group.rank();
  auto send_next = [&]() -> absl::Status {
    TITAN_ASSIGN_OR_RETURN(auto transfer, group.StartSend(send, (r + 1) % cp, tag));
    transfers.push_back(std::move(transfer));
    return absl::OkStatus();
  };
  auto receive_previous = [&]() -> absl::Status {
    TITAN_ASSIGN_OR_RETURN(auto transfer, group.StartRecv(receive, (r + cp - 1) % cp, tag));
    transfers.push_back(std::move(transfer));
    return absl::OkStatus();
  };
  // Even ranks send first, odd ranks receive first: a communicator whose point-to-point calls
  // block in issue order (NCCL's) then never waits in a circle.
  if (r % 2 == 0) {
    TITAN_RETURN_IF_ERROR(send_next());
    return receive_previous();
  }
  TITAN_RETURN_IF_ERROR(receive_previous());
  return send_next();
}

absl::Status WaitAll(Transfers& transfers) {
  for (auto& transfer : transfers) TITAN_RETURN_IF_ERROR(transfer->Wait());
  transfers.clear();
  return absl::OkStatus();
}

}  // namespace titan::cp
