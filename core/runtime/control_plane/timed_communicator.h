// A communicator that measures how long the training thread waits in communication, so the
// control plane can tell a rank's own work (its busy time) from waiting for the others: in a
// synchronous job every rank's step lasts as long as the slowest rank's.
#ifndef TITAN_CORE_RUNTIME_CONTROL_PLANE_TIMED_COMMUNICATOR_H_
#define TITAN_CORE_RUNTIME_CONTROL_PLANE_TIMED_COMMUNICATOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "titan/communicator.h"

namespace titan {

// Seconds spent inside calls made from one thread (the one that created it), over a
// communicator and every communicator split from it.
struct CommunicationClock {
  std::thread::id thread = std::this_thread::get_id();
  std::atomic<int64_t> nanoseconds{0};
  double seconds() const { return static_cast<double>(nanoseconds.load()) * 1e-9; }
};

// Adds the seconds the clock's thread spends in `call` to the clock.
absl::Status TimeCall(CommunicationClock& clock, const std::function<absl::Status()>& call);

class TimedCommunicator : public Communicator {
 public:
  TimedCommunicator(std::unique_ptr<Communicator> inner, std::shared_ptr<CommunicationClock> clock)
      : inner_(std::move(inner)), clock_(std::move(clock)) {}

  const CommunicationClock& clock() const { return *clock_; }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::Status AllReduce(TensorView buffer, ReduceOp op) override;
  absl::Status ReduceScatter(const TensorView& input, TensorView output, ReduceOp op) override;
  absl::Status AllGather(const TensorView& input, TensorView output) override;
  absl::Status Broadcast(TensorView buffer, int root) override;
  absl::Status Send(const TensorView& buffer, int peer, int tag) override;
  absl::Status Recv(TensorView buffer, int peer, int tag) override;
  absl::Status Barrier() override;
  // Transfers start at once; the training thread's waits for them are timed.
  absl::StatusOr<std::unique_ptr<Transfer>> StartSend(const TensorView& buffer, int peer,
                                                      int tag) override;
  absl::StatusOr<std::unique_ptr<Transfer>> StartRecv(TensorView buffer, int peer,
                                                      int tag) override;
  absl::StatusOr<std::unique_ptr<Transfer>> Exchange(
      std::span<const PeerMessage> messages) override;
  absl::StatusOr<std::unique_ptr<Transfer>> StartExchange(std::span<const PeerMessage> messages,
                                                          const StreamOrder& order) override;
  absl::StatusOr<std::unique_ptr<Transfer>> StartAllGather(const TensorView& input,
                                                           TensorView output,
                                                           const StreamOrder& order) override;
  absl::Status AllToAll(const TensorView& input, std::span<const int64_t> send_counts,
                        TensorView output, std::span<const int64_t> recv_counts) override;
  bool ordered_point_to_point() const override { return inner_->ordered_point_to_point(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override;
  void UseTrainTimeout() override { inner_->UseTrainTimeout(); }
  absl::StatusOr<std::string> DumpFlightRecord(absl::string_view reason) override {
    return inner_->DumpFlightRecord(reason);
  }

 private:
  std::unique_ptr<Communicator> inner_;
  std::shared_ptr<CommunicationClock> clock_;
};

// `world` wrapped so that the calls of the calling thread are timed.
std::unique_ptr<Communicator> TimeCommunication(std::unique_ptr<Communicator> world);

// The clock of a communicator made by TimeCommunication (or split from one), else null.
const CommunicationClock* CommunicationClockOf(const Communicator& communicator);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_CONTROL_PLANE_TIMED_COMMUNICATOR_H_
