#include "core/runtime/control_plane/timed_communicator.h"

#include <chrono>

namespace titan {

template <typename Call>
absl::Status TimedCommunicator::Timed(Call call) {
  if (std::this_thread::get_id() != clock_->thread) return call();
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = call();
  clock_->nanoseconds +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  return status;
}

absl::Status TimedCommunicator::AllReduce(TensorView buffer, ReduceOp op) {
  return Timed([&] { return inner_->AllReduce(buffer, op); });
}
absl::Status TimedCommunicator::ReduceScatter(const TensorView& input, TensorView output,
                                              ReduceOp op) {
  return Timed([&] { return inner_->ReduceScatter(input, output, op); });
}
absl::Status TimedCommunicator::AllGather(const TensorView& input, TensorView output) {
  return Timed([&] { return inner_->AllGather(input, output); });
}
absl::Status TimedCommunicator::Broadcast(TensorView buffer, int root) {
  return Timed([&] { return inner_->Broadcast(buffer, root); });
}
absl::Status TimedCommunicator::Send(const TensorView& buffer, int peer, int tag) {
  return Timed([&] { return inner_->Send(buffer, peer, tag); });
}
absl::Status TimedCommunicator::Recv(TensorView buffer, int peer, int tag) {
  return Timed([&] { return inner_->Recv(buffer, peer, tag); });
}
absl::Status TimedCommunicator::Barrier() {
  return Timed([&] { return inner_->Barrier(); });
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
