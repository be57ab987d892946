#include "core/runtime/guarded_communicator.h"

#include <string>
#include <utility>

#include "core/runtime/plugin_registry.h"

namespace titan {
namespace {

class GuardedTransfer : public Communicator::Transfer {
 public:
  GuardedTransfer(std::unique_ptr<Transfer> inner, const void* plugin)
      : inner_(std::move(inner)), plugin_(plugin) {}
  absl::Status Wait() override {
    return CallPluginAtOf(plugin_, "Transfer::Wait", [&] { return inner_->Wait(); });
  }

 private:
  std::unique_ptr<Transfer> inner_;
  const void* plugin_;
};

class GuardedCommunicator : public Communicator {
 public:
  GuardedCommunicator(std::unique_ptr<Communicator> inner, const void* plugin)
      : inner_(std::move(inner)), plugin_(plugin) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::Status AllReduce(TensorView buffer, ReduceOp op) override {
    return Guard("AllReduce", [&] { return inner_->AllReduce(buffer, op); });
  }
  absl::Status ReduceScatter(const TensorView& input, TensorView output, ReduceOp op) override {
    return Guard("ReduceScatter", [&] { return inner_->ReduceScatter(input, output, op); });
  }
  absl::Status AllGather(const TensorView& input, TensorView output) override {
    return Guard("AllGather", [&] { return inner_->AllGather(input, output); });
  }
  absl::Status Broadcast(TensorView buffer, int root) override {
    return Guard("Broadcast", [&] { return inner_->Broadcast(buffer, root); });
  }
  absl::Status Send(const TensorView& buffer, int peer, int tag) override {
    return Guard("Send", [&] { return inner_->Send(buffer, peer, tag); });
  }
  absl::Status Recv(TensorView buffer, int peer, int tag) override {
    return Guard("Recv", [&] { return inner_->Recv(buffer, peer, tag); });
  }
  absl::Status Barrier() override {
    return Guard("Barrier", [&] { return inner_->Barrier(); });
  }
  absl::StatusOr<std::unique_ptr<Transfer>> StartSend(const TensorView& buffer, int peer,
                                                      int tag) override {
    return Transferring("StartSend", [&] { return inner_->StartSend(buffer, peer, tag); });
  }
  absl::StatusOr<std::unique_ptr<Transfer>> StartRecv(TensorView buffer, int peer,
                                                      int tag) override {
    return Transferring("StartRecv", [&] { return inner_->StartRecv(buffer, peer, tag); });
  }
  absl::StatusOr<std::unique_ptr<Transfer>> Exchange(
      std::span<const PeerMessage> messages) override {
    return Transferring("Exchange", [&] { return inner_->Exchange(messages); });
  }
  absl::StatusOr<std::unique_ptr<Transfer>> StartExchange(std::span<const PeerMessage> messages,
                                                          const StreamOrder& order) override {
    return Transferring("StartExchange", [&] { return inner_->StartExchange(messages, order); });
  }
  absl::StatusOr<std::unique_ptr<Transfer>> StartAllGather(const TensorView& input,
                                                           TensorView output,
                                                           const StreamOrder& order) override {
    return Transferring("StartAllGather",
                        [&] { return inner_->StartAllGather(input, output, order); });
  }
  absl::Status AllToAll(const TensorView& input, std::span<const int64_t> send_counts,
                        TensorView output, std::span<const int64_t> recv_counts) override {
    return Guard("AllToAll",
                 [&] { return inner_->AllToAll(input, send_counts, output, recv_counts); });
  }
  bool ordered_point_to_point() const override { return inner_->ordered_point_to_point(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override {
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> part,
                           Guard("Split", [&] { return inner_->Split(color, key); }));
    return std::unique_ptr<Communicator>(new GuardedCommunicator(std::move(part), plugin_));
  }
  void UseTrainTimeout() override { inner_->UseTrainTimeout(); }
  absl::StatusOr<std::string> DumpFlightRecord(absl::string_view reason) override {
    return Guard("DumpFlightRecord", [&] { return inner_->DumpFlightRecord(reason); });
  }

 private:
  template <typename Call>
  auto Guard(absl::string_view what, Call&& call) -> decltype(call()) {
    return CallPluginAtOf(plugin_, what, std::forward<Call>(call));
  }
  // A call that starts a transfer, whose Wait is guarded too.
  template <typename Call>
  absl::StatusOr<std::unique_ptr<Transfer>> Transferring(absl::string_view what, Call&& call) {
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Transfer> started, Guard(what, call));
    return std::unique_ptr<Transfer>(new GuardedTransfer(std::move(started), plugin_));
  }

  std::unique_ptr<Communicator> inner_;
  const void* plugin_;
};

}  // namespace

std::unique_ptr<Communicator> GuardCommunication(std::unique_ptr<Communicator> world,
                                                 const void* comm_plugin) {
  return std::make_unique<GuardedCommunicator>(std::move(world), comm_plugin);
}

}  // namespace titan
