#ifndef TITAN_CORE_RUNTIME_SINGLE_PROCESS_COMM_H_
#define TITAN_CORE_RUNTIME_SINGLE_PROCESS_COMM_H_

#include <memory>
#include <string>

#include "titan/comm.h"

namespace titan {

// A group of one rank: every collective is the identity (a copy where input and output
// differ), so one code path serves one rank and many.
class SingleProcessCommunicator : public Communicator {
 public:
  // `ordered_point_to_point`: answer as the job's real communicator will (the job plan's
  // stand-in mesh, so that plugins check against it what they check in the run).
  // `flight_record_folder`: where DumpFlightRecord writes; empty: it keeps no record.
  explicit SingleProcessCommunicator(bool ordered_point_to_point = false,
                                     std::string flight_record_folder = "")
      : ordered_point_to_point_(ordered_point_to_point),
        flight_record_folder_(std::move(flight_record_folder)) {}
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
  // The mpi plugin's record, with no collectives: one rank exchanges nothing. It is written all
  // the same, so that asking every rank of any job for its record (SIGUSR1) gets a file.
  absl::StatusOr<std::string> DumpFlightRecord(absl::string_view reason) override;

 private:
  bool ordered_point_to_point_;
  std::string flight_record_folder_;
};

class SingleProcessComm : public CommPlugin {
 public:
  CommTraits traits() const override { return {.joins_many_ranks = false}; }
  // Its communicators write their flight records to <options.dump_folder>/flight_recorder.
  absl::StatusOr<std::unique_ptr<Communicator>> ConnectWorld(const JoinOptions& options) override;
};

// <dump_folder>/flight_recorder, where a rank's flight record goes unless its comm plugin is
// told otherwise.
std::string FlightRecordFolder(const std::string& dump_folder);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_SINGLE_PROCESS_COMM_H_
