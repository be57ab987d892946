// The `mpi` comm plugin: the job's communicators over OpenMPI. Every operation is started
// non-blocking and polled against a timeout, so a rank that dies or
// stalls turns into an error naming the rank, the collective and its sequence number on
// every rank still waiting, instead of a hang; the flight recorder keeps the last ones.
// MPI cannot cancel a collective: after a timeout the communicator refuses further work, and
// the caller's buffer may still be written (by a late peer) until the process exits.
//
// MPI runs at MPI_THREAD_MULTIPLE: data-parallel plugins overlap collectives with compute by
// issuing them from a communication thread while the main thread computes (OpenMPI makes no
// progress on a non-blocking collective unless a thread is inside MPI). The operations of one
// communicator are serialized by a lock; their order must still be the same on every rank.
// Forming communicators (connecting, splitting) waits `init_timeout_seconds`; every other
// operation waits that long too until the trainer's first step is done (UseTrainTimeout), as
// TorchTitan does, and `train_timeout_seconds` after it.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "plugins/comm/common/comm_settings.h"
#include "plugins/comm/common/flight_recorder.h"
#include "plugins/comm/mpi/device_staging.h"
#include "plugins/comm/mpi/primitives.h"
#include "titan/comm.h"

namespace titan::mpi {
namespace {

using comm::Clock;
using comm::FlightRecorder;

// What every communicator of this process shares.
struct Job {
  Job(std::chrono::seconds init_timeout, std::chrono::seconds timeout, int world_rank,
      size_t trace_size, std::string trace_folder)
      : init_timeout(init_timeout),
        timeout(timeout),
        world_rank(world_rank),
        recorder(trace_size, std::move(trace_folder), world_rank) {}
  // The limit of an operation that names none: the init timeout until the trainer's first
  // step is done everywhere (UseTrainTimeout), the train timeout after.
  std::chrono::seconds Timeout() const { return training.load() ? timeout : init_timeout; }
  std::chrono::seconds init_timeout;
  std::chrono::seconds timeout;
  std::atomic<bool> training{false};
  int world_rank;
  FlightRecorder recorder;
  TraceSink* trace = nullptr;  // the profiler, while profiling.enable_profiling is on
};

// A request that timed out stays active inside MPI, with the staging buffer it may still
// write. MPI_Finalize would wait for it, for ever if its peer died, so a process holding one
// exits without finalizing and leaves the other ranks to the launcher: a surviving rank
// must exit within the timeout, not hang on a dead one.
struct PendingRequest {
  MPI_Request request;
  std::shared_ptr<void> staging;
};
std::mutex pending_mutex;
std::vector<PendingRequest> pending;

std::atomic<bool> dump_requested{false};
extern "C" void RequestDump(int) { dump_requested.store(true); }

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  std::lock_guard<std::mutex> lock(pending_mutex);
  if (pending.empty()) MPI_Finalize();
}

// Runs `body`, turning an escaping exception (bad_alloc) into a Status naming `op`.
template <typename Body>
auto Guarded(absl::string_view op, const Body& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(op, ": ", e.what()));
  }
}

struct Staging {
  std::vector<float> in, out;
};

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::string name, std::shared_ptr<Job> job,
                  std::shared_ptr<StagingPool> staging, bool owned = true)
      : comm_(comm),
        name_(std::move(name)),
        job_(std::move(job)),
        staging_(std::move(staging)),
        owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    members_ = WorldRanks(comm_, size_);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && broken_.empty() && owned_) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void UseTrainTimeout() override { job_->training.store(true); }

  absl::Status AllReduce(TensorView buffer, ReduceOp op) override {
    if (staging_ != nullptr && OnDevice(buffer)) {
      TITAN_ASSIGN_OR_RETURN(StagedBuffer host, Stage("all-reduce", buffer, true));
      return Unstage(AllReduce(host.host, op), host, buffer);
    }
    return Guarded("all-reduce", [&] { return Reduce("all-reduce", buffer, buffer, op); });
  }
  absl::Status ReduceScatter(const TensorView& input, TensorView output, ReduceOp op) override {
    if (staging_ != nullptr && (OnDevice(input) || OnDevice(output))) {
      TITAN_ASSIGN_OR_RETURN(StagedBuffer in, Stage("reduce-scatter", input, true));
      TITAN_ASSIGN_OR_RETURN(StagedBuffer out, Stage("reduce-scatter", output, false));
      return Unstage(ReduceScatter(in.host, out.host, op), out, output, &in);
    }
    return Guarded("reduce-scatter", [&] { return Reduce("reduce-scatter", input, output, op); });
  }

  absl::Status AllGather(const TensorView& input, TensorView output) override {
    if (staging_ != nullptr && (OnDevice(input) || OnDevice(output))) {
      TITAN_RETURN_IF_ERROR(CheckBuffers("all-gather", output, input, size_, true));
      // This rank's chunk is copied into the host output and gathered in place.
      TITAN_ASSIGN_OR_RETURN(StagedBuffer out, Stage("all-gather", output, false));
      TITAN_ASSIGN_OR_RETURN(StagedBuffer in, Stage("all-gather", input, true));
      TensorView chunk = in.host;
      chunk.data = static_cast<char*>(out.host.data) + input.nbytes() * static_cast<size_t>(rank_);
      std::memcpy(chunk.data, in.host.data, input.nbytes());
      return Unstage(AllGather(chunk, out.host), out, output, &in);
    }
    TITAN_RETURN_IF_ERROR(CheckBuffers("all-gather", output, input, size_));
    int bytes = static_cast<int>(input.nbytes());
    // Gathering in place (input is this rank's chunk of output) is what FSDP does.
    const void* send = input.data == static_cast<char*>(output.data) + int64_t{bytes} * rank_
                           ? MPI_IN_PLACE
                           : input.data;
    return Run("all-gather", output.nbytes(), members_, nullptr, [&](MPI_Request* r) {
      return MPI_Iallgather(send, bytes, MPI_BYTE, output.data, bytes, MPI_BYTE, comm_, r);
    });
  }

  absl::Status AllToAll(const TensorView& input, std::span<const int64_t> send_counts,
                        TensorView output, std::span<const int64_t> recv_counts) override {
    if (staging_ != nullptr && (OnDevice(input) || OnDevice(output))) {
      TITAN_ASSIGN_OR_RETURN(StagedBuffer in, Stage("all-to-all", input, true));
      TITAN_ASSIGN_OR_RETURN(StagedBuffer out, Stage("all-to-all", output, false));
      return Unstage(AllToAll(in.host, send_counts, out.host, recv_counts), out, output, &in);
    }
    TITAN_RETURN_IF_ERROR(CheckBuffers("all-to-all", input, input, 1));
    TITAN_RETURN_IF_ERROR(CheckBuffers("all-to-all", output, output, 1));
    if (input.dtype != output.dtype || send_counts.size() != static_cast<size_t>(size_) ||
        recv_counts.size() != static_cast<size_t>(size_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "all-to-all on ", name_, " (", size_, " ranks): expected one dtype and ", size_,
          " send and receive counts, found ", send_counts.size(), " and ", recv_counts.size()));
    }
    // MPI's counts and displacements are ints, in bytes here.
    const int64_t element = static_cast<int64_t>(DTypeSize(input.dtype));
    auto layout = std::make_shared<std::vector<int>>(4 * static_cast<size_t>(size_));
    int* counts[2] = {layout->data(), layout->data() + 2 * size_};
    int* displacements[2] = {layout->data() + size_, layout->data() + 3 * size_};
    const std::span<const int64_t> given[2] = {send_counts, recv_counts};
    const TensorView* buffers[2] = {&input, &output};
    size_t moved = 0;  // sent and received, for the flight record and the trace
    for (int side = 0; side < 2; ++side) {
      int64_t offset = 0;
      for (int j = 0; j < size_; ++j) {
        const int64_t bytes = given[side][j] * element;
        if (given[side][j] < 0 || offset + bytes > static_cast<int64_t>(buffers[side]->nbytes())) {
          return absl::InvalidArgumentError(
              absl::StrCat("all-to-all on ", name_, ": the ", side == 0 ? "send" : "receive",
                           " counts exceed the buffer's ", buffers[side]->numel(), " elements"));
        }
        counts[side][j] = static_cast<int>(bytes);
        displacements[side][j] = static_cast<int>(offset);
        offset += bytes;
        moved += static_cast<size_t>(bytes);
      }
    }
    return Run("all-to-all", moved, members_, layout, [&](MPI_Request* r) {
      return MPI_Ialltoallv(input.data, counts[0], displacements[0], MPI_BYTE, output.data,
                            counts[1], displacements[1], MPI_BYTE, comm_, r);
    });
  }

  absl::Status Broadcast(TensorView buffer, int root) override {
    if (staging_ != nullptr && OnDevice(buffer)) {
      TITAN_ASSIGN_OR_RETURN(StagedBuffer host, Stage("broadcast", buffer, rank_ == root));
      return Unstage(Broadcast(host.host, root), host, buffer);
    }
    TITAN_RETURN_IF_ERROR(CheckBuffers("broadcast", buffer, buffer, 1));
    TITAN_RETURN_IF_ERROR(CheckPeer("broadcast", root, true));
    return Run("broadcast", buffer.nbytes(), members_, nullptr, [&](MPI_Request* r) {
      return MPI_Ibcast(buffer.data, static_cast<int>(buffer.nbytes()), MPI_BYTE, root, comm_, r);
    });
  }

  absl::Status Send(const TensorView& buffer, int peer, int tag) override {
    if (staging_ != nullptr && OnDevice(buffer)) {
      TITAN_ASSIGN_OR_RETURN(StagedBuffer host, Stage("send", buffer, true));
      return Unstage(Send(host.host, peer, tag), host, std::nullopt);
    }
    return PointToPoint("send", buffer, peer, tag);
  }
  absl::Status Recv(TensorView buffer, int peer, int tag) override {
    if (staging_ != nullptr && OnDevice(buffer)) {
      TITAN_ASSIGN_OR_RETURN(StagedBuffer host, Stage("recv", buffer, false));
      return Unstage(Recv(host.host, peer, tag), host, buffer);
    }
    return PointToPoint("recv", buffer, peer, tag);
  }

  // Waits for every rank of the job to connect, against the init timeout.
  absl::Status JoinBarrier() {
    return Run(
        "join", 0, members_, nullptr, [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); },
        job_->init_timeout);
  }

  absl::Status Barrier() override {
    return Run("barrier", 0, members_, nullptr,
               [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
  }

  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override {
    if (color < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("split of ", name_, ": color ", color, " must be >= 0"));
    }
    // MPI has no non-blocking split: a barrier first bounds the wait for the other ranks.
    TITAN_RETURN_IF_ERROR(Run(
        "split", 0, members_, nullptr, [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); },
        job_->init_timeout));
    std::lock_guard<std::mutex> lock(mutex_);
    MPI_Comm part;
    absl::Status split = MpiStatus(MPI_Comm_split(comm_, color, key, &part));
    if (!split.ok()) {
      return absl::InternalError(absl::StrCat("rank ", job_->world_rank, ": split of ", name_,
                                              " failed: ", split.message()));
    }
    try {
      return std::unique_ptr<Communicator>(
          new MpiCommunicator(part, absl::StrCat(name_, "/split(", color, ")"), job_, staging_));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("split of ", name_, ": ", e.what()));
    }
  }

  // A SIGUSR1 asks every rank it reaches for its flight record; a rank serves it from its
  // next collective (or the one it is stuck in).
  void ServeDumpRequest() {
    if (!dump_requested.exchange(false)) return;
    absl::StatusOr<std::string> dumped = DumpFlightRecord("SIGUSR1");
    std::fprintf(stderr, "rank %d: flight record %s\n", job_->world_rank,
                 dumped.ok() ? dumped->c_str() : std::string(dumped.status().message()).c_str());
  }

  absl::StatusOr<std::string> DumpFlightRecord(absl::string_view reason) override {
    try {
      return job_->recorder.Dump(reason);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("flight recorder: ", e.what()));
    }
  }

 private:
  // A device buffer's host copy (device_staging.h).
  absl::StatusOr<StagedBuffer> Stage(absl::string_view op, const TensorView& view, bool copy_in) {
    if (!OnDevice(view)) {  // a host buffer beside a device one goes as it is
      return StagedBuffer{view, nullptr};
    }
    absl::StatusOr<StagedBuffer> staged = StageIn(*staging_, op, view, copy_in);
    if (!staged.ok()) {
      return absl::Status(staged.status().code(),
                          absl::StrCat(staged.status().message(), " (on ", name_, ")"));
    }
    return staged;
  }

 public:
  // After the host operation `done`: copies `out` back into `target` (when given and on the
  // device). A failed operation may leave MPI writing the host copies later: they are never
  // reused.
  absl::Status Unstage(absl::Status done, const StagedBuffer& out, std::optional<TensorView> target,
                       const StagedBuffer* in = nullptr) {
    if (!done.ok()) {
      for (const StagedBuffer* staged : {&out, in}) {
        if (staged != nullptr && staged->block != nullptr) staged->block->lost = true;
      }
      return done;
    }
    if (!target.has_value() || out.block == nullptr) return absl::OkStatus();
    return StageOut(*staging_, out, *target);
  }

 private:
  // All-reduce (output == input) and reduce-scatter; bf16 is reduced in f32.
  absl::Status Reduce(absl::string_view op, const TensorView& input, TensorView output,
                      ReduceOp reduce) {
    bool in_place = input.data == output.data;
    TITAN_RETURN_IF_ERROR(CheckBuffers(op, input, output, in_place ? 1 : size_));
    absl::StatusOr<MPI_Datatype> type = ReductionType(input.dtype, reduce);
    if (!type.ok())
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", type.status().message()));
    auto staging = std::make_shared<Staging>();
    const void* send = input.data;
    void* receive = output.data;
    if (input.dtype == DType::kBF16) {
      staging->in = Bf16ToF32(input);
      staging->out.resize(in_place ? 0 : static_cast<size_t>(output.numel()));
      send = staging->in.data();
      receive = in_place ? staging->in.data() : staging->out.data();
    }
    int count = static_cast<int>(output.numel());
    TITAN_RETURN_IF_ERROR(Run(op, input.nbytes(), members_, staging, [&](MPI_Request* r) {
      return in_place ? MPI_Iallreduce(MPI_IN_PLACE, receive, count, *type, ReductionOp(reduce),
                                       comm_, r)
                      : MPI_Ireduce_scatter_block(send, receive, count, *type, ReductionOp(reduce),
                                                  comm_, r);
    }));
    float* result = static_cast<float*>(receive);
    if (reduce == ReduceOp::kAvg) {
      for (int i = 0; i < count; ++i) result[i] /= static_cast<float>(size_);
    }
    if (input.dtype == DType::kBF16) F32ToBf16(in_place ? staging->in : staging->out, output);
    return absl::OkStatus();
  }

  absl::Status PointToPoint(absl::string_view op, const TensorView& buffer, int peer, int tag) {
    std::function<int(MPI_Request*)> start;
    TITAN_ASSIGN_OR_RETURN(auto peers, PointToPointStart(op, buffer, peer, tag, start));
    return Run(op, buffer.nbytes(), std::move(peers), nullptr, start);
  }

 public:
  // Checks a send or receive of `buffer` with `peer` and sets `start` to begin it.
  absl::StatusOr<std::shared_ptr<const std::vector<int>>> PointToPointStart(
      absl::string_view op, const TensorView& buffer, int peer, int tag,
      std::function<int(MPI_Request*)>& start) {
    TITAN_RETURN_IF_ERROR(CheckBuffers(op, buffer, buffer, 1));
    TITAN_RETURN_IF_ERROR(CheckPeer(op, peer, false));
    const bool send = absl::StartsWith(op, "send");
    void* data = buffer.data;
    const int bytes = static_cast<int>(buffer.nbytes());
    MPI_Comm comm = comm_;
    start = [=](MPI_Request* r) {
      return send ? MPI_Isend(data, bytes, MPI_BYTE, peer, tag, comm, r)
                  : MPI_Irecv(data, bytes, MPI_BYTE, peer, tag, comm, r);
    };
    return std::make_shared<const std::vector<int>>(
        std::vector<int>{(*members_)[static_cast<size_t>(peer)]});
  }

  absl::StatusOr<std::unique_ptr<Transfer>> StartSend(const TensorView& buffer, int peer,
                                                      int tag) override {
    return StartTransfer("send", buffer, peer, tag);
  }
  absl::StatusOr<std::unique_ptr<Transfer>> StartRecv(TensorView buffer, int peer,
                                                      int tag) override {
    return StartTransfer("recv", buffer, peer, tag);
  }

 private:
  absl::StatusOr<std::unique_ptr<Transfer>> StartTransfer(absl::string_view op,
                                                          const TensorView& buffer, int peer,
                                                          int tag);

  // `large` holds `chunks` times the elements of `small`, same dtype, both contiguous on the
  // CPU, and a message fits MPI's int count.
  absl::Status CheckBuffers(absl::string_view op, const TensorView& large, const TensorView& small,
                            int chunks, bool device_ok = false) const {
    for (const TensorView* view : {&large, &small}) {
      if ((!device_ok && view->device.type != DeviceType::kCpu) || !view->is_contiguous()) {
        return absl::InvalidArgumentError(absl::StrCat(
            op, " on ", name_, ": buffers must be contiguous and on the CPU",
            staging_ == nullptr ? " (this communicator was given no device to stage through)"
                                : " or the rank's device"));
      }
    }
    if (large.dtype != small.dtype || large.numel() != small.numel() * chunks) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, " on ", name_, " (", size_, " ranks): expected ", chunks, " x ", small.numel(), " ",
          DTypeName(small.dtype), " elements, found ", large.numel(), " ", DTypeName(large.dtype)));
    }
    if (large.nbytes() > static_cast<size_t>(INT_MAX)) {
      return absl::InvalidArgumentError(absl::StrCat(op, " on ", name_, ": ", large.nbytes(),
                                                     " bytes exceed one MPI message; split it"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckPeer(absl::string_view op, int peer, bool self_ok) const {
    if (peer < 0 || peer >= size_ || (!self_ok && peer == rank_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, " on ", name_, ": rank ", peer, " is not a peer of rank ", rank_, " among ", size_));
    }
    return absl::OkStatus();
  }

  // Starts one operation, waits for it against `timeout` (the job's train timeout unless
  // given) and records it.
  absl::Status Run(absl::string_view op, size_t bytes,
                   std::shared_ptr<const std::vector<int>> peers, std::shared_ptr<void> staging,
                   const std::function<int(MPI_Request*)>& start,
                   std::optional<std::chrono::seconds> timeout = std::nullopt) {
    std::lock_guard<std::mutex> lock(mutex_);
    TITAN_ASSIGN_OR_RETURN(Operation operation,
                           StartLocked(op, bytes, std::move(peers), std::move(staging), start));
    operation.blocking = true;
    return FinishLocked(operation, timeout);
  }

 public:
  // An operation under way: started and recorded, not yet waited for.
  struct Operation {
    std::string op, what;
    int64_t sequence = 0, handle = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    int code = MPI_SUCCESS;
    std::shared_ptr<void> staging;
    // For the profiler's trace: what the flight recorder keeps, and whether the operation is
    // waited for right after it starts, on the same thread.
    size_t bytes = 0;
    std::shared_ptr<const std::vector<int>> peers;
    Clock::time_point started;
    bool blocking = false;
  };

  absl::StatusOr<Operation> StartLocked(absl::string_view op, size_t bytes,
                                        std::shared_ptr<const std::vector<int>> peers,
                                        std::shared_ptr<void> staging,
                                        const std::function<int(MPI_Request*)>& start) {
    ServeDumpRequest();
    Operation operation;
    operation.op = std::string(op);
    operation.what = absl::StrCat("rank ", job_->world_rank, ": ", op, " #", sequence_ + 1, " on ",
                                  name_, " (", size_, " ranks)");
    if (!broken_.empty()) {
      return absl::AbortedError(absl::StrCat(
          operation.what, ": the communicator is unusable after an earlier ", broken_));
    }
    operation.sequence = ++sequence_;
    operation.bytes = bytes;
    operation.peers = peers;
    operation.started = Clock::now();
    operation.handle = job_->recorder.Start({operation.sequence,
                                             std::string(op),
                                             name_,
                                             bytes,
                                             std::move(peers),
                                             operation.started,
                                             {},
                                             {}});
    operation.staging = std::move(staging);
    operation.code = start(&operation.request);
    return operation;
  }

  absl::Status FinishLocked(Operation& operation,
                            std::optional<std::chrono::seconds> timeout = std::nullopt) {
    const Clock::time_point waited = Clock::now();
    const std::chrono::seconds limit = timeout.value_or(job_->Timeout());
    int code = operation.code;
    WaitResult result = WaitResult::kFailed;
    if (code == MPI_SUCCESS) {
      result = WaitUntil(operation.request, std::chrono::steady_clock::now() + limit, code,
                         [this] { ServeDumpRequest(); });
    }
    if (result == WaitResult::kDone) {
      job_->recorder.Finish(operation.handle, "completed");
      Trace(operation, waited);
      return absl::OkStatus();
    }
    std::string failure;
    if (result == WaitResult::kTimedOut) {
      job_->recorder.Finish(operation.handle, "timed out");
      std::lock_guard<std::mutex> lock(pending_mutex);
      pending.push_back({operation.request, std::move(operation.staging)});
      failure =
          absl::StrCat("did not complete within ", limit.count(), "s (a peer died or stalled)");
    } else {
      job_->recorder.Finish(operation.handle, "failed");
      failure = absl::StrCat("failed: ", MpiStatus(code).message());
    }
    broken_ = absl::StrCat(operation.op, " #", operation.sequence, " that ", failure);
    absl::StatusOr<std::string> dumped = DumpFlightRecord(operation.what);
    std::string record = dumped.ok() ? absl::StrCat("flight record in ", *dumped)
                                     : std::string(dumped.status().message());
    std::string message = absl::StrCat(operation.what, " ", failure, "; ", record);
    return result == WaitResult::kTimedOut ? absl::DeadlineExceededError(message)
                                           : absl::InternalError(message);
  }

  std::mutex& mutex() { return mutex_; }

 private:
  MPI_Comm comm_;
  std::string name_;
  std::shared_ptr<Job> job_;
  std::shared_ptr<StagingPool> staging_;  // null on the CPU: host buffers only
  bool owned_ = true;  // freed with the communicator (MPI_COMM_WORLD itself is not)
  // The operation as a span of the profiled step on the thread that waited for it: from its start
  // when it was waited for at once, else from the wait (so spans nest on each thread's track).
  void Trace(const Operation& operation, Clock::time_point waited) const {
    TraceSink* trace = job_->trace;
    if (trace == nullptr || !trace->recording()) return;
    auto micros = [](Clock::time_point t) {
      return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
    };
    const nlohmann::json args = {{"comm", name_},
                                 {"sequence", operation.sequence},
                                 {"bytes", operation.bytes},
                                 {"peers", operation.peers ? *operation.peers : std::vector<int>{}},
                                 {"started_us", micros(operation.started)}};
    trace->Span(operation.op, "collective", micros(operation.blocking ? operation.started : waited),
                micros(Clock::now()), args.dump());
  }

  int rank_ = 0;
  int size_ = 1;
  std::shared_ptr<const std::vector<int>> members_;
  std::mutex mutex_;  // one operation at a time on this communicator
  int64_t sequence_ = 0;
  std::string broken_;  // what made the communicator unusable; empty while it works
};

// A send or receive started by StartSend/StartRecv; Wait holds the communicator's lock while it
// polls, as a blocking operation would.
class MpiTransfer : public Communicator::Transfer {
 public:
  MpiTransfer(MpiCommunicator& comm, MpiCommunicator::Operation operation)
      : comm_(comm), operation_(std::move(operation)) {}
  ~MpiTransfer() override { Wait().IgnoreError(); }  // a transfer is never left running
  absl::Status Wait() override {
    if (waited_) return result_;
    std::lock_guard<std::mutex> lock(comm_.mutex());
    result_ = comm_.FinishLocked(operation_);
    waited_ = true;
    return result_;
  }

 private:
  MpiCommunicator& comm_;
  MpiCommunicator::Operation operation_;
  bool waited_ = false;
  absl::Status result_;
};

// A transfer of a device buffer through its host copy: a receive copies it back once waited.
class StagedTransfer : public Communicator::Transfer {
 public:
  StagedTransfer(MpiCommunicator& comm, std::unique_ptr<Communicator::Transfer> transfer,
                 StagedBuffer host, std::optional<TensorView> target)
      : comm_(comm), transfer_(std::move(transfer)), host_(std::move(host)), target_(target) {}
  ~StagedTransfer() override { Wait().IgnoreError(); }
  absl::Status Wait() override {
    if (!waited_) result_ = comm_.Unstage(transfer_->Wait(), host_, target_);
    waited_ = true;
    return result_;
  }

 private:
  MpiCommunicator& comm_;
  std::unique_ptr<Communicator::Transfer> transfer_;
  StagedBuffer host_;
  std::optional<TensorView> target_;  // the device buffer a receive fills
  bool waited_ = false;
  absl::Status result_;
};

absl::StatusOr<std::unique_ptr<Communicator::Transfer>> MpiCommunicator::StartTransfer(
    absl::string_view op, const TensorView& buffer, int peer, int tag) {
  if (staging_ != nullptr && OnDevice(buffer)) {
    const bool send = op == "send";
    TITAN_ASSIGN_OR_RETURN(StagedBuffer host, Stage(op, buffer, send));
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Transfer> transfer,
                           StartTransfer(op, host.host, peer, tag));
    return std::unique_ptr<Transfer>(
        new StagedTransfer(*this, std::move(transfer), std::move(host),
                           send ? std::nullopt : std::optional<TensorView>(buffer)));
  }
  return Guarded(op, [&]() -> absl::StatusOr<std::unique_ptr<Transfer>> {
    std::function<int(MPI_Request*)> start;
    TITAN_ASSIGN_OR_RETURN(auto peers, PointToPointStart(op, buffer, peer, tag, start));
    std::lock_guard<std::mutex> lock(mutex_);
    TITAN_ASSIGN_OR_RETURN(Operation operation,
                           StartLocked(op, buffer.nbytes(), std::move(peers), nullptr, start));
    return std::unique_ptr<Transfer>(new MpiTransfer(*this, std::move(operation)));
  });
}

class MpiComm : public CommPlugin {
 public:
  std::vector<ConfigKey> ConfigKeys() const override { return comm::CommSettings::Keys(); }
  absl::Status Configure(const ConfigView& config) override { return settings_.Configure(config); }

  absl::StatusOr<std::unique_ptr<Communicator>> ConnectWorld(const JoinOptions& options) override {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      TITAN_RETURN_IF_ERROR(InitializeMpi(std::chrono::seconds(settings_.init_timeout_seconds)));
      std::atexit(FinalizeAtExit);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    try {
      if (job_ == nullptr) {
        int world_rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
        job_ = std::make_shared<Job>(std::chrono::seconds(settings_.init_timeout_seconds),
                                     std::chrono::seconds(settings_.train_timeout_seconds),
                                     world_rank, static_cast<size_t>(settings_.trace_buf_size),
                                     settings_.TraceFolder(options));
        std::signal(SIGUSR1, RequestDump);
      }
      job_->trace = options.trace;
      // A private copy of MPI_COMM_WORLD, so titan's traffic never matches anyone else's.
      // MPI_Comm_dup blocks until every rank arrives; a barrier first bounds that wait.
      MpiCommunicator launched(MPI_COMM_WORLD, "launched", job_, nullptr, /*owned=*/false);
      TITAN_RETURN_IF_ERROR(launched.JoinBarrier());
      MPI_Comm world;
      absl::Status dup = MpiStatus(MPI_Comm_dup(MPI_COMM_WORLD, &world));
      if (!dup.ok()) return absl::InternalError(absl::StrCat("MPI_Comm_dup: ", dup.message()));
      // Device buffers are staged through the rank's device (device_staging.h).
      std::shared_ptr<StagingPool> staging;
      if (options.device != nullptr && options.device->type() != DeviceType::kCpu) {
        staging = StagingPool::Create(*options.device);
      }
      return std::unique_ptr<Communicator>(
          new MpiCommunicator(world, "world", job_, std::move(staging)));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("connecting to the MPI job: ", e.what()));
    }
  }

 private:
  comm::CommSettings settings_;
  std::shared_ptr<Job> job_;
};

}  // namespace
}  // namespace titan::mpi

TITAN_PLUGIN(titan::CommPlugin, titan::mpi::MpiComm, "mpi", "1.0.0",
             "communicators over MPI with collective timeouts and a flight recorder")
