// Collective and point-to-point communication among the ranks of one group.
//
// Buffers are TensorViews; their `device` says where the bytes live. The contract, chosen so an
// accelerator's communicator (NCCL) fits without another redesign:
// - A host communicator (mpi, single) takes host buffers (device cpu) and refuses others with an
//   error naming the call; every call blocks until its buffers may be reused.
// - A device communicator takes buffers on its device and enqueues each call on the compute's
//   current stream (Compute::current_stream()), after the kernels issued before it, as NCCL
//   does. The call returns once the work is queued; the caller records an event on that stream
//   (Compute::RecordEvent) and a buffer may be reused, or its result read, once that event is
//   complete. Kernels issued after the call on the same stream see its result without waiting.
// On the CPU both readings agree: the one stream runs everything at once.
// To overlap communication with compute, a caller starts a collective (StartAllGather,
// StartExchange) naming the events of its buffers (StreamOrder): a device communicator then
// waits for those alone, not for every kernel queued before the call, and holds up the compute
// stream only when the caller waits for the transfer, right before the first kernel that needs
// it. The rule that keeps it correct: a collective never starts before every write of the
// buffers it reads, nor before every earlier read or write of the buffers it writes, is
// complete; the events named must cover all of those.
#ifndef TITAN_COMMUNICATOR_H_
#define TITAN_COMMUNICATOR_H_

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "titan/compute.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan {

enum class ReduceOp : uint8_t { kSum, kAvg, kMax, kMin };

// Where a started collective (Communicator::StartAllGather) sits among the compute stream's
// work on a device communicator; host communicators ignore it.
struct StreamOrder {
  // Events recorded on the compute stream (Compute::RecordEvent) that the call waits for in
  // place of all the work queued before it: together they follow the last write of every
  // buffer it reads and the last read or write of every buffer it writes. Empty: the whole
  // compute stream so far. The caller releases them once the call has returned.
  std::vector<EventHandle> after;
};

// One message of a grouped exchange (Communicator::Exchange).
struct PeerMessage {
  enum class Kind : uint8_t { kSend, kRecv };
  Kind kind = Kind::kSend;
  TensorView buffer;  // read by a send, filled by a receive
  int peer = 0;
  int tag = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: every rank ends with the reduction of all ranks' buffers.
  virtual absl::Status AllReduce(TensorView buffer, ReduceOp op) = 0;
  // `input` holds size() equal chunks; rank r receives the reduction of chunk r in `output`.
  virtual absl::Status ReduceScatter(const TensorView& input, TensorView output, ReduceOp op) = 0;
  // `output` holds size() chunks, chunk r being rank r's `input`.
  virtual absl::Status AllGather(const TensorView& input, TensorView output) = 0;
  virtual absl::Status Broadcast(TensorView buffer, int root) = 0;
  virtual absl::Status Send(const TensorView& buffer, int peer, int tag) = 0;
  virtual absl::Status Recv(TensorView buffer, int peer, int tag) = 0;
  virtual absl::Status Barrier() = 0;

  // A send, receive or collective under way. Wait returns once the buffer may be reused (a
  // send) or holds the message (a receive), or the error, as the blocking call would; on a
  // device communicator that means, as for the blocking calls, that work queued on the compute
  // stream after Wait sees it. Destroying an unwaited transfer waits for it.
  class Transfer {
   public:
    virtual ~Transfer() = default;
    virtual absl::Status Wait() = 0;
  };
  // Start a send or receive and return at once, so that a rank can send and go on computing
  // (pipeline parallelism: sends never wait for their receiver).
  virtual absl::StatusOr<std::unique_ptr<Transfer>> StartSend(const TensorView& /*buffer*/,
                                                              int /*peer*/, int /*tag*/) {
    return absl::UnimplementedError("this communicator has no non-blocking send");
  }
  virtual absl::StatusOr<std::unique_ptr<Transfer>> StartRecv(TensorView /*buffer*/, int /*peer*/,
                                                              int /*tag*/) {
    return absl::UnimplementedError("this communicator has no non-blocking receive");
  }

  // Several sends and receives, posted together so that ranks sending to each other at once
  // cannot wait on each other's order (NCCL: one ncclGroupStart/ncclGroupEnd; MPI: non-blocking
  // requests). Returns once every receive holds its message, as Recv does (a device
  // communicator: once the group is queued, the compute stream waiting for all of it); the
  // transfer returned waits for the sends, which may still be under way (destroying it waits
  // too). Messages between two ranks pair by tag where the backend has tags and in the order
  // issued where it has none (see ordered_point_to_point).
  virtual absl::StatusOr<std::unique_ptr<Transfer>> Exchange(
      std::span<const PeerMessage> messages) {
    std::vector<std::unique_ptr<Transfer>> sends, receives;
    absl::Status done = absl::OkStatus();
    for (const PeerMessage& m : messages) {
      const bool send = m.kind == PeerMessage::Kind::kSend;
      absl::StatusOr<std::unique_ptr<Transfer>> started =
          send ? StartSend(m.buffer, m.peer, m.tag) : StartRecv(m.buffer, m.peer, m.tag);
      if (!started.ok()) {
        done = started.status();
        break;
      }
      (send ? sends : receives).push_back(std::move(*started));
    }
    for (const auto& receive : receives) done.Update(receive->Wait());
    auto pending = std::make_unique<Transfers>(std::move(sends));
    if (!done.ok()) return done;  // after the sends, which `pending` waits for as it goes
    return std::unique_ptr<Transfer>(std::move(pending));
  }
  // Whether sends and receives pair in the order issued between two ranks, whatever their tags,
  // and each exchange (or Send, Recv) holds up the next until all of it has completed: NCCL,
  // whose point-to-point calls run in order on one stream. A caller must then prove that its
  // ranks' exchanges never wait on each other (the pp plugin checks its schedule).
  virtual bool ordered_point_to_point() const { return false; }

  // Several transfers waited for as one: the first error, after waiting for all of them.
  class Transfers : public Transfer {
   public:
    explicit Transfers(std::vector<std::unique_ptr<Transfer>> transfers)
        : transfers_(std::move(transfers)) {}
    ~Transfers() override { Wait().IgnoreError(); }
    absl::Status Wait() override {
      for (const auto& transfer : transfers_) result_.Update(transfer->Wait());
      transfers_.clear();
      return result_;
    }

   private:
    std::vector<std::unique_ptr<Transfer>> transfers_;
    absl::Status result_;
  };

  // An all-gather that does not hold up the compute stream (see the top of this file): a device
  // communicator queues it after `order.after` and returns; the compute stream waits for it
  // when the transfer's Wait is called, which the caller does before the first work that reads
  // `output` or writes either buffer. A host communicator gathers before it returns.
  virtual absl::StatusOr<std::unique_ptr<Transfer>> StartAllGather(const TensorView& input,
                                                                   TensorView output,
                                                                   const StreamOrder& /*order*/) {
    TITAN_RETURN_IF_ERROR(AllGather(input, output));
    return std::unique_ptr<Transfer>(new Transfers({}));
  }

  // An exchange that does not hold up the compute stream, as StartAllGather is to AllGather: a
  // device communicator queues the group after `order.after` and returns; the compute stream
  // waits for all of it (receives and sends) when the transfer's Wait is called, which the
  // caller does before the first work that reads a receive buffer or writes any buffer of the
  // messages. The default is Exchange, its receives complete on return.
  virtual absl::StatusOr<std::unique_ptr<Transfer>> StartExchange(
      std::span<const PeerMessage> messages, const StreamOrder& /*order*/) {
    return Exchange(messages);
  }

  // Every rank sends `send_counts[j]` elements of `input`, back to back in rank order, to rank j
  // and receives `recv_counts[j]` elements from rank j into `output`, in rank order (expert
  // parallelism's dispatch and combine; the counts must agree pairwise, which the callers
  // ensure by exchanging them first). Blocking as the other collectives. The default posts one
  // Exchange for the other ranks and copies this rank's own part on the host, so a device
  // communicator overrides it.
  virtual absl::Status AllToAll(const TensorView& input, std::span<const int64_t> send_counts,
                                TensorView output, std::span<const int64_t> recv_counts);

  // Ranks passing the same color form a new communicator, ordered by key.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) = 0;

  // Until this is called, operations wait as long as joining the job may (a comm plugin's init
  // timeout), since ranks finish uneven start-up work apart; from then on they wait the shorter
  // train timeout. The trainer calls it once its first step is done on every rank, as
  // TorchTitan does; it applies to every communicator of the job. Backends without timeouts
  // ignore it.
  virtual void UseTrainTimeout() {}

  // Writes this rank's flight record (its last collectives) and returns the file written;
  // backends that keep none say so. Timeouts and fatal errors write one without being asked.
  virtual absl::StatusOr<std::string> DumpFlightRecord(absl::string_view reason) {
    return absl::UnimplementedError(
        absl::StrCat("this communicator keeps no flight record (asked for: ", reason, ")"));
  }
};

inline absl::Status Communicator::AllToAll(const TensorView& input,
                                           std::span<const int64_t> send_counts, TensorView output,
                                           std::span<const int64_t> recv_counts) {
  const auto n = static_cast<size_t>(size());
  if (send_counts.size() != n || recv_counts.size() != n || input.dtype != output.dtype ||
      !input.is_contiguous() || !output.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "all-to-all among ", n, " ranks: expected ", n, " send and receive counts and contiguous ",
        "buffers of one dtype, found ", send_counts.size(), " and ", recv_counts.size()));
  }
  int64_t sent = 0, received = 0;
  for (size_t j = 0; j < n; ++j) sent += send_counts[j], received += recv_counts[j];
  if (sent > input.numel() || received > output.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "all-to-all: the counts send ", sent, " and receive ", received, " elements, but the ",
        "buffers hold ", input.numel(), " and ", output.numel()));
  }
  const size_t element = DTypeSize(input.dtype);
  auto part = [&](const TensorView& whole, int64_t first, int64_t count) {
    TensorView view = whole;
    view.data = static_cast<char*>(whole.data) + static_cast<size_t>(first) * element;
    view.shape = {count};
    view.strides.clear();
    return view;
  };
  constexpr int kTag = 0x7a11;
  std::vector<PeerMessage> messages;
  TensorView own_in, own_out;
  for (int64_t j = 0, in = 0, out = 0; j < static_cast<int64_t>(n); ++j) {
    const TensorView send = part(input, in, send_counts[j]);
    const TensorView recv = part(output, out, recv_counts[j]);
    if (j == rank()) {
      own_in = send, own_out = recv;
    } else {
      if (send_counts[j] > 0)
        messages.push_back({PeerMessage::Kind::kSend, send, static_cast<int>(j), kTag});
      if (recv_counts[j] > 0)
        messages.push_back({PeerMessage::Kind::kRecv, recv, static_cast<int>(j), kTag});
    }
    in += send_counts[j], out += recv_counts[j];
  }
  if (own_in.numel() != own_out.numel()) {
    return absl::InvalidArgumentError(absl::StrCat("all-to-all: rank ", rank(), " sends itself ",
                                                   own_in.numel(), " elements but receives ",
                                                   own_out.numel()));
  }
  if (own_in.numel() > 0) {
    if (input.device.type != DeviceType::kCpu || output.device.type != DeviceType::kCpu) {
      return absl::UnimplementedError(
          "all-to-all: this communicator moves device buffers only between ranks");
    }
    std::memmove(own_out.data, own_in.data, own_in.nbytes());
  }
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Transfer> sends, Exchange(messages));
  return sends->Wait();
}

}  // namespace titan

#endif  // TITAN_COMMUNICATOR_H_
