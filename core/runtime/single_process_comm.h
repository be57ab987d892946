#ifndef TITAN_CORE_RUNTIME_SINGLE_PROCESS_COMM_H_
#define TITAN_CORE_RUNTIME_SINGLE_PROCESS_COMM_H_

#include <memory>

#include "titan/comm.h"

namespace titan {

// A group of one rank: every collective is the identity (a copy where input and output
// differ), so one code path serves one rank and many.
class SingleProcessCommunicator : public Communicator {
 public:
  // `ordered_point_to_point`: answer as the job's real communicator will (the job plan's
  // stand-in mesh, so that plugins check against it what they check in the run).
  explicit SingleProcessCommunicator(bool ordered_point_to_point = false)
      : ordered_point_to_point_(ordered_point_to_point) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status AllReduce(TensorView buffer, ReduceOp op) override;
  absl::Status ReduceScatter(const TensorView& input, TensorView output, ReduceOp op) override;
  absl::Status AllGather(const TensorView& input, TensorView output) override;
  absl::Status Broadcast(TensorView buffer, int root) override;
  absl::Status Send(const TensorView& buffer, int peer, int tag) override;
  absl::Status Recv(TensorView buffer, int peer, int tag) override;
  // Only the empty exchange: a group of one rank has no peer.
  absl::StatusOr<std::unique_ptr<Transfer>> Exchange(
      std::span<const PeerMessage> messages) override;
  absl::Status Barrier() override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override;
  bool ordered_point_to_point() const override { return ordered_point_to_point_; }

 private:
  bool ordered_point_to_point_;
};

class SingleProcessComm : public CommPlugin {
 public:
  CommTraits traits() const override { return {.joins_many_ranks = false}; }
  absl::StatusOr<std::unique_ptr<Communicator>> ConnectWorld(const JoinOptions& options) override;
};

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_SINGLE_PROCESS_COMM_H_
