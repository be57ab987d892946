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
#ifndef TITAN_COMMUNICATOR_H_
#define TITAN_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan {

enum class ReduceOp : uint8_t { kSum, kAvg, kMax, kMin };

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

  // A send or receive under way. Wait returns once the buffer may be reused (a send) or holds
  // the message (a receive), or the error, as the blocking call would; destroying an unwaited
  // transfer waits for it.
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

}  // namespace titan

#endif  // TITAN_COMMUNICATOR_H_
