#include "core/runtime/control_plane/timed_communicator.h"

#include <chrono>

namespace titan {
namespace {

class TimedTransfer : public Communicator::Transfer {
 public:
  TimedTransfer(std::unique_ptr<Transfer> inner, std::shared_ptr<CommunicationClock> clock)
      : inner_(std::move(inner)), clock_(std::move(clock)) {}
  absl::Status Wait() override {
    return TimeCall(*clock_, [&] { return inner_->Wait(); });
  }

 private:
  std::unique_ptr<Transfer> inner_;
  std::shared_ptr<CommunicationClock> clock_;
};

}  // namespace

absl::Status TimeCall(CommunicationClock& clock, const std::function<absl::Status()>& call) {
  if (std::this_thread::get_id() != clock.thread) return call();
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = call();
  clock.nanoseconds +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  return status;
}

absl::Status TimedCommunicator::AllReduce(TensorView buffer, ReduceOp op) {
  return TimeCall(*clock_, [&] { return inner_->AllReduce(buffer, op); });
}
absl::Status TimedCommunicator::ReduceScatter(const TensorView& input, TensorView output,
                                              ReduceOp op) {
  return TimeCall(*clock_, [&] { return inner_->ReduceScatter(input, output, op); });
}
absl::Status TimedCommunicator::AllGather(const TensorView& input, TensorView output) {
  return TimeCall(*clock_, [&] { return inner_->AllGather(input, output); });
}
absl::Status TimedCommunicator::Broadcast(TensorView buffer, int root) {
  return TimeCall(*clock_, [&] { return inner_->Broadcast(buffer, root); });
}
absl::Status TimedCommunicator::Send(const TensorView& buffer, int peer, int tag) {
  return TimeCall(*clock_, [&] { return inner_->Send(buffer, peer, tag); });
}
absl::Status TimedCommunicator::Recv(TensorView buffer, int peer, int tag) {
  return TimeCall(*clock_, [&] { return inner_->Recv(buffer, peer, tag); });
}
absl::Status TimedCommunicator::Barrier() {
  return TimeCall(*clock_, [&] { return inner_->Barrier(); });
}

// The inner communicator's own all-to-all (the default one would go through Exchange).
absl::Status TimedCommunicator::AllToAll(const TensorView& input,
                                         std::span<const int64_t> send_counts, TensorView output,
                                         std::span<const int64_t> recv_counts) {
  return TimeCall(*clock_,
                  [&] { return inner_->AllToAll(input, send_counts, output, recv_counts); });
}

absl::StatusOr<std::unique_ptr<Communicator::Transfer>> TimedCommunicator::StartSend(
    const TensorView& buffer, int peer, int tag) {
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Transfer> started, inner_->StartSend(buffer, peer, tag));
  return std::unique_ptr<Transfer>(new TimedTransfer(std::move(started), clock_));
}
absl::StatusOr<std::unique_ptr<Communicator::Transfer>> TimedCommunicator::StartRecv(
    TensorView buffer, int peer, int tag) {
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Transfer> started, inner_->StartRecv(buffer, peer, tag));
  return std::unique_ptr<Transfer>(new TimedTransfer(std::move(started), clock_));
}

// The receives are waited for inside the call, so the whole call is timed.
absl::StatusOr<std::unique_ptr<Communicator::Transfer>> TimedCommunicator::Exchange(
    std::span<const PeerMessage> messages) {
  std::unique_ptr<Transfer> sends;
  TITAN_RETURN_IF_ERROR(TimeCall(*clock_, [&]() -> absl::Status {
    TITAN_ASSIGN_OR_RETURN(sends, inner_->Exchange(messages));
    return absl::OkStatus();
  }));
  return std::unique_ptr<Transfer>(new TimedTransfer(std::move(sends), clock_));
}

absl::StatusOr<std::unique_ptr<Communicator::Transfer>> TimedCommunicator::StartExchange(
    std::span<const PeerMessage> messages, const StreamOrder& order) {
  std::unique_ptr<Transfer> started;
  TITAN_RETURN_IF_ERROR(TimeCall(*clock_, [&]() -> absl::Status {
    TITAN_ASSIGN_OR_RETURN(started, inner_->StartExchange(messages, order));
    return absl::OkStatus();
  }));
  return std::unique_ptr<Transfer>(new TimedTransfer(std::move(started), clock_));
}

absl::StatusOr<std::unique_ptr<Communicator::Transfer>> TimedCommunicator::StartAllGather(
    const TensorView& input, TensorView output, const StreamOrder& order) {
  std::unique_ptr<Transfer> started;
  TITAN_RETURN_IF_ERROR(TimeCall(*clock_, [&]() -> absl::Status {
    TITAN_ASSIGN_OR_RETURN(started, inner_->StartAllGather(input, output, order));
    return absl::OkStatus();
  }));
  return std::unique_ptr<Transfer>(new TimedTransfer(std::move(started), clock_));
}

absl::StatusOr<std::unique_ptr<Communicator>> TimedCommunicator::Split(int color, int key) {
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> part, inner_->Split(color, key));
  return std::unique_ptr<Communicator>(new TimedCommunicator(std::move(part), clock_));
}

std::unique_ptr<Communicator> TimeCommunication(std::unique_ptr<Communicator> world) {
  return std::make_unique<TimedCommunicator>(std::move(world),
                                             std::make_shared<CommunicationClock>());
}

const CommunicationClock* CommunicationClockOf(const Communicator& communicator) {
  const auto* timed = dynamic_cast<const TimedCommunicator*>(&communicator);
  return timed == nullptr ? nullptr : &timed->clock();
}

}  // namespace titan
