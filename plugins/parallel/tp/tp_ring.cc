#include "plugins/parallel/tp/tp_ring.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace titan::tp {
namespace {

constexpr int kRingTag = 0x7a5e;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Elements [first, first + count) of contiguous `v`, flat.
TensorView Run(const TensorView& v, int64_t first, int64_t count) {
  TensorView run = v;
  run.data = static_cast<char*>(v.data) + static_cast<size_t>(first) * DTypeSize(v.dtype);
  run.shape = {count};
  run.strides.clear();
  return run;
}

class NoTransfer : public Communicator::Transfer {
 public:
  absl::Status Wait() override { return absl::OkStatus(); }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator::Transfer>> TpRing::Start(const TensorView& send,
                                                                      int to,
                                                                      const TensorView& recv,
                                                                      int from) {
  std::vector<PeerMessage> messages;
  if (send.data != nullptr) messages.push_back({PeerMessage::Kind::kSend, send, to, kRingTag});
  if (recv.data != nullptr) messages.push_back({PeerMessage::Kind::kRecv, recv, from, kRingTag});
  if (messages.empty()) return std::unique_ptr<Communicator::Transfer>(new NoTransfer());
  // In issue order every rank's send and receive must be posted together, or the ring waits on
  // itself; such a backend (NCCL) queues the group after the work queued so far and returns, and
  // the compute stream waits for it only at Finish, after the chunk in hand's kernels: those run
  // while the group moves the next chunk.
  if (group_.ordered_point_to_point()) return group_.StartExchange(messages, StreamOrder{});
  std::vector<std::unique_ptr<Communicator::Transfer>> started;
  for (const PeerMessage& m : messages) {
    absl::StatusOr<std::unique_ptr<Communicator::Transfer>> one =
        m.kind == PeerMessage::Kind::kSend ? group_.StartSend(m.buffer, m.peer, m.tag)
                                           : group_.StartRecv(m.buffer, m.peer, m.tag);
    if (!one.ok()) return one.status();  // `started` waits for what began as it goes
    started.push_back(std::move(*one));
  }
  return std::unique_ptr<Communicator::Transfer>(new Communicator::Transfers(std::move(started)));
}

absl::Status TpRing::Finish(absl::string_view layer, Communicator::Transfer& transfer,
                            double started) {
  const double waiting = Now();
  absl::Status done = transfer.Wait();
  const double finished = Now();
  auto it = std::find_if(times_.begin(), times_.end(),
                         [&](const OverlapTime& t) { return t.layer == layer; });
  if (it == times_.end()) it = times_.insert(times_.end(), OverlapTime{std::string(layer), 0, 0});
  it->hidden += waiting - started;
  it->exposed += finished - waiting;
  if (!done.ok()) {
    return absl::Status(done.code(),
                        absl::StrCat("tp: async ring of ", layer, ": ", done.message()));
  }
  return done;
}

absl::Status TpRing::AllGatherMatmul(absl::string_view layer, const TensorView& local,
                                     const TensorView& full, const ConsumeChunk& consume) {
  const int n = group_.size(), r = group_.rank();
  const int64_t m = local.numel();
  if (full.numel() != m * n || full.dtype != local.dtype || !full.is_contiguous() ||
      !local.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tp: async all-gather of ", layer, ": expected contiguous buffers of one dtype, the full ",
        "one ", n, " x ", m, " elements; found ", full.numel()));
  }
  Compute& compute = *device_.compute();
  TITAN_RETURN_IF_ERROR(compute.Copy(local, Run(full, r * m, m)));
  // Step s holds chunk r - s: it goes on to the next rank while chunk r - s - 1 comes in.
  for (int s = 0; s < n; ++s) {
    const int here = ((r - s) % n + n) % n, coming = ((here - 1) % n + n) % n;
    const bool last = s == n - 1;
    const double started = Now();
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Communicator::Transfer> transfer,
                           Start(last ? TensorView{} : Run(full, here * m, m), (r + 1) % n,
                                 last ? TensorView{} : Run(full, coming * m, m), (r + n - 1) % n));
    absl::Status computed = consume(here);
    TITAN_RETURN_IF_ERROR(Finish(layer, *transfer, started));
    TITAN_RETURN_IF_ERROR(computed);
  }
  return absl::OkStatus();
}

absl::Status TpRing::MatmulReduceScatter(absl::string_view layer, const ProduceChunk& produce,
                                         const TensorView& local) {
  const int n = group_.size(), r = group_.rank();
  const int64_t m = local.numel();
  if (local.dtype != DType::kF32 || !local.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat("tp: async reduce-scatter of ", layer,
                                                   ": expected a contiguous f32 output, found ",
                                                   DTypeName(local.dtype)));
  }
  TITAN_RETURN_IF_ERROR(Reserve(m));
  Compute& compute = *device_.compute();
  // The scratch as the compute names its device (DeviceBuffer::view says index 0).
  auto scratch = [&](const DeviceBuffer& b) {
    return TensorView{b.f32(), DType::kF32, compute.device(), {m}, {}};
  };
  const TensorView received = scratch(received_);
  // Step s produces chunk r + s + 1, adds the running sum of it rank r + 1 sent, and passes it
  // on to rank r - 1; at the last step the chunk is this rank's own, summed over every rank.
  // One transfer per step, both ways at once (a backend running point-to-point in issue order
  // needs them posted together): it is waited for before the next step adds what it received,
  // which also frees the running sum it sent for the step after that to write.
  std::unique_ptr<Communicator::Transfer> transfer;
  double started = 0;
  for (int s = 0; s < n; ++s) {
    const bool last = s == n - 1;
    TensorView sum = last ? local : scratch(sums_[s % 2]);
    sum.shape = local.shape;
    TITAN_RETURN_IF_ERROR(produce((r + s + 1) % n, sum));
    if (transfer != nullptr) {
      TITAN_RETURN_IF_ERROR(Finish(layer, *transfer, started));
      TITAN_RETURN_IF_ERROR(compute.Accumulate(received, Run(sum, 0, m)));
    }
    if (last) break;
    started = Now();
    TITAN_ASSIGN_OR_RETURN(transfer, Start(Run(sum, 0, m), (r + n - 1) % n, received, (r + 1) % n));
  }
  return absl::OkStatus();
}

absl::Status TpRing::Reserve(int64_t floats) {
  if (floats <= reserved_) return absl::OkStatus();
  for (DeviceBuffer& b : sums_) {
    TITAN_ASSIGN_OR_RETURN(b, DeviceBuffer::Allocate(device_, floats));
  }
  TITAN_ASSIGN_OR_RETURN(received_, DeviceBuffer::Allocate(device_, floats));
  reserved_ = floats;
  return absl::OkStatus();
}

std::vector<OverlapTime> TpRing::TakeTimes() { return std::exchange(times_, {}); }

}  // namespace titan::tp
