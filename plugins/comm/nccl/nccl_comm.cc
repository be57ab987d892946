// The `nccl` comm plugin: the job's communicators over NCCL, for buffers in GPU memory.
// mpirun stays the launcher: each communicator's ncclUniqueId is broadcast over MPI, and a
// split forms its members with MPI_Comm_split before NCCL connects them.
//
// Stream order, as titan/communicator.h says: each call waits (on the GPU) for the work
// queued on the compute's current stream, runs on this communicator's own stream, and the
// compute stream then waits for it; the call returns once queued. A started all-gather waits
// for the events its caller names instead, and the compute stream for it only once its
// transfer is waited for (stream_order.h). Communicators are created
// non-blocking, so joining is bounded by comm.init_timeout_seconds; every operation is bounded
// by the watchdog (watchdog.h), which aborts a communicator that does not finish in time.
// NCCL has no message tags: sends and receives between two ranks match in the order issued.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/comm/common/comm_settings.h"
#include "plugins/comm/common/flight_recorder.h"
#include "plugins/comm/mpi/primitives.h"
#include "plugins/comm/nccl/group_launch.h"
#include "plugins/comm/nccl/nccl_library.h"
#include "plugins/comm/nccl/stream_order.h"
#include "plugins/comm/nccl/watchdog.h"
#include "titan/comm.h"

namespace titan::nccl {
namespace {

using comm::Clock;

// What every communicator of this process shares.
struct Job {
  Job(std::chrono::seconds init_timeout, std::chrono::seconds timeout, int world_rank,
      size_t trace_size, std::string trace_folder, int device)
      : init_timeout(init_timeout),
        timeout(timeout),
        world_rank(world_rank),
        device(device),
        recorder(trace_size, std::move(trace_folder), world_rank),
        watchdog(recorder, device) {}
  std::chrono::seconds Timeout() const { return training.load() ? timeout : init_timeout; }
  std::chrono::seconds init_timeout;
  std::chrono::seconds timeout;
  std::atomic<bool> training{false};
  int world_rank;
  int device;  // the CUDA device of this rank
  comm::FlightRecorder recorder;
  Watchdog watchdog;  // after the recorder it reports to
};

absl::StatusOr<ncclDataType_t> ReductionType(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    case DType::kI32:
    case DType::kI64:
      if (op == ReduceOp::kAvg) break;  // as the mpi plugin: no integer averages
      return dtype == DType::kI32 ? ncclInt32 : ncclInt64;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("cannot reduce ", DTypeName(dtype), " elements with this operation"));
}

ncclRedOp_t ReductionOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

// Waits for an MPI request against `timeout`, naming `what` when it does not complete.
absl::Status WaitMpi(MPI_Request& request, std::chrono::seconds timeout, const std::string& what) {
  int code = MPI_SUCCESS;
  switch (mpi::WaitUntil(request, std::chrono::steady_clock::now() + timeout, code)) {
    case mpi::WaitResult::kDone:
      return absl::OkStatus();
    case mpi::WaitResult::kTimedOut:
      return absl::DeadlineExceededError(absl::StrCat(
          what, " did not complete within ", timeout.count(), "s (comm.init_timeout_seconds)"));
    case mpi::WaitResult::kFailed:
      break;
  }
  return absl::InternalError(absl::StrCat(what, ": ", mpi::MpiStatus(code).message()));
}

// Waits for a non-blocking NCCL call (init, and any call that answers ncclInProgress).
absl::Status WaitNccl(ncclComm_t comm, ncclResult_t result, const char* call,
                      std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (result == ncclInProgress) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("nccl: ", call, " did not complete within ", timeout.count(), "s"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    ncclResult_t state = ncclSuccess;
    ncclResult_t queried = Nccl().CommGetAsyncError(comm, &state);
    result = queried != ncclSuccess ? queried : state;
  }
  return NcclStatus(result, call);
}

class NcclCommunicator : public Communicator {
 public:
  // Connects the ranks of `mpi` (owned from here) into an NCCL communicator named `name`.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(MPI_Comm mpi, std::string name,
                                                                  std::shared_ptr<Job> job,
                                                                  Compute& compute) {
    int rank = 0, size = 1;
    MPI_Comm_rank(mpi, &rank);
    MPI_Comm_size(mpi, &size);
    const std::string what = absl::StrCat("rank ", job->world_rank, ": connecting ", name);
    ncclUniqueId id;
    if (rank == 0) {
      TITAN_RETURN_IF_ERROR(NcclStatus(Nccl().GetUniqueId(&id), "ncclGetUniqueId"));
    }
    MPI_Request request;
    int code = MPI_Ibcast(&id, sizeof(id), MPI_BYTE, 0, mpi, &request);
    if (code != MPI_SUCCESS) return mpi::MpiStatus(code);
    TITAN_RETURN_IF_ERROR(WaitMpi(request, job->init_timeout, what + " (ncclUniqueId broadcast)"));
    TITAN_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(job->device), "cudaSetDevice"));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // so that joining is bounded by the init timeout
    ncclComm_t comm = nullptr;
    ncclResult_t init = Nccl().CommInitRankConfig(&comm, size, id, rank, &config);
    absl::Status joined = WaitNccl(comm, init, "ncclCommInitRankConfig", job->init_timeout);
    if (!joined.ok()) {
      if (comm != nullptr) Nccl().CommAbort(comm);
      MPI_Comm_free(&mpi);
      return absl::Status(joined.code(), absl::StrCat(what, ": ", joined.message(),
                                                      "; the communicator was aborted"));
    }
    cudaStream_t stream = nullptr;
    cudaEvent_t ready = nullptr;
    absl::Status created = CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                      "cudaStreamCreateWithFlags");
    if (created.ok()) {
      created = CudaStatus(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming),
                           "cudaEventCreateWithFlags");
    }
    auto state = std::make_shared<CommState>(comm, stream);
    if (!created.ok()) return created;
    return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(
        mpi, std::move(name), std::move(job), compute, std::move(state), ready, rank, size));
  }

  ~NcclCommunicator() override {
    cudaEventDestroy(ready_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&mpi_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void UseTrainTimeout() override { job_->training.store(true); }

  absl::Status AllReduce(TensorView buffer, ReduceOp op) override {
    TITAN_RETURN_IF_ERROR(Check("all-reduce", buffer, buffer, 1));
    TITAN_ASSIGN_OR_RETURN(ncclDataType_t type, Type("all-reduce", buffer.dtype, op));
    return Enqueue("all-reduce", buffer.nbytes(), members_,
                   [&](ncclComm_t c, cudaStream_t s) {
                     return Nccl().AllReduce(buffer.data, buffer.data,
                                             static_cast<size_t>(buffer.numel()), type,
                                             ReductionOp(op), c, s);
                   })
        .status();
  }

  absl::Status ReduceScatter(const TensorView& input, TensorView output, ReduceOp op) override {
    TITAN_RETURN_IF_ERROR(Check("reduce-scatter", input, output, size_));
    TITAN_ASSIGN_OR_RETURN(ncclDataType_t type, Type("reduce-scatter", input.dtype, op));
    return Enqueue("reduce-scatter", input.nbytes(), members_,
                   [&](ncclComm_t c, cudaStream_t s) {
                     return Nccl().ReduceScatter(input.data, output.data,
                                                 static_cast<size_t>(output.numel()), type,
                                                 ReductionOp(op), c, s);
                   })
        .status();
  }

  absl::Status AllGather(const TensorView& input, TensorView output) override {
    return Gather(input, output, {}, nullptr).status();
  }

  // A started all-gather or exchange. Holds its own event of the operation's end: the watchdog
  // releases the operation's once it completed, maybe before the caller waits.
  class StartedOperation : public Transfer {
   public:
    StartedOperation(std::shared_ptr<Completion> completion, cudaEvent_t done, Compute& compute,
                     int device)
        : completion_(std::move(completion)), done_(done), compute_(compute), device_(device) {}
    ~StartedOperation() override {
      Wait().IgnoreError();
      cudaEventDestroy(done_);  // CUDA keeps it for the stream that waits on it
    }
    absl::Status Wait() override {
      if (waited_) return absl::OkStatus();
      waited_ = true;
      if (completion_->state.load() == Completion::kFailed) return completion_->Wait();
      TITAN_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
      return CudaStatus(
          cudaStreamWaitEvent(static_cast<cudaStream_t>(compute_.current_stream()), done_, 0),
          "cudaStreamWaitEvent");
    }

   private:
    std::shared_ptr<Completion> completion_;
    cudaEvent_t done_;
    Compute& compute_;
    int device_;
    bool waited_ = false;
  };
  absl::StatusOr<std::unique_ptr<Transfer>> StartAllGather(const TensorView& input,
                                                           TensorView output,
                                                           const StreamOrder& order) override {
    cudaEvent_t done = nullptr;
    TITAN_ASSIGN_OR_RETURN(auto completion, Gather(input, output, order.after, &done));
    return std::unique_ptr<Transfer>(
        new StartedOperation(std::move(completion), done, compute_, job_->device));
  }

  absl::Status Broadcast(TensorView buffer, int root) override {
    TITAN_RETURN_IF_ERROR(Check("broadcast", buffer, buffer, 1));
    TITAN_RETURN_IF_ERROR(CheckPeer("broadcast", root, true));
    return Enqueue("broadcast", buffer.nbytes(), members_,
                   [&](ncclComm_t c, cudaStream_t s) {
                     return Nccl().Broadcast(buffer.data, buffer.data, buffer.nbytes(), ncclUint8,
                                             root, c, s);
                   })
        .status();
  }

  absl::Status Send(const TensorView& buffer, int peer, int tag) override {
    return PointToPoint("send", buffer, peer, tag).status();
  }
  absl::Status Recv(TensorView buffer, int peer, int tag) override {
    return PointToPoint("recv", buffer, peer, tag).status();
  }

  // A started send or receive: Wait blocks the host until it completed on the GPU.
  class NcclTransfer : public Transfer {
   public:
    explicit NcclTransfer(std::shared_ptr<Completion> completion)
        : completion_(std::move(completion)) {}
    ~NcclTransfer() override { Wait().IgnoreError(); }
    absl::Status Wait() override { return completion_->Wait(); }

   private:
    std::shared_ptr<Completion> completion_;
  };
  absl::StatusOr<std::unique_ptr<Transfer>> StartSend(const TensorView& buffer, int peer,
                                                      int tag) override {
    TITAN_ASSIGN_OR_RETURN(auto completion, PointToPoint("send", buffer, peer, tag));
    return std::unique_ptr<Transfer>(new NcclTransfer(std::move(completion)));
  }
  absl::StatusOr<std::unique_ptr<Transfer>> StartRecv(TensorView buffer, int peer,
                                                      int tag) override {
    TITAN_ASSIGN_OR_RETURN(auto completion, PointToPoint("recv", buffer, peer, tag));
    return std::unique_ptr<Transfer>(new NcclTransfer(std::move(completion)));
  }

  // One NCCL group: its sends and receives run as one operation on the stream. The transfer
  // returned (its sends) blocks the host until the group completed on the GPU.
  absl::StatusOr<std::unique_ptr<Transfer>> Exchange(
      std::span<const PeerMessage> messages) override {
    if (messages.empty()) return std::unique_ptr<Transfer>(new Transfers({}));
    TITAN_ASSIGN_OR_RETURN(auto completion, Group(messages, {}, nullptr));
    return std::unique_ptr<Transfer>(new NcclTransfer(std::move(completion)));
  }
  // The same group after `order` alone; the compute stream waits for it at the transfer's Wait.
  absl::StatusOr<std::unique_ptr<Transfer>> StartExchange(std::span<const PeerMessage> messages,
                                                          const StreamOrder& order) override {
    if (messages.empty()) return std::unique_ptr<Transfer>(new Transfers({}));
    cudaEvent_t done = nullptr;
    TITAN_ASSIGN_OR_RETURN(auto completion, Group(messages, order.after, &done));
    return std::unique_ptr<Transfer>(
        new StartedOperation(std::move(completion), done, compute_, job_->device));
  }
  bool ordered_point_to_point() const override { return true; }

  // One NCCL group of a send and a receive with every rank, itself included.
  absl::Status AllToAll(const TensorView& input, std::span<const int64_t> send_counts,
                        TensorView output, std::span<const int64_t> recv_counts) override {
    TITAN_RETURN_IF_ERROR(Check("all-to-all", input, input, 1));
    TITAN_RETURN_IF_ERROR(Check("all-to-all", output, output, 1));
    if (input.dtype != output.dtype || send_counts.size() != static_cast<size_t>(size_) ||
        recv_counts.size() != static_cast<size_t>(size_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "all-to-all on ", name_, " (", size_, " ranks): expected one dtype and ", size_,
          " send and receive counts, found ", send_counts.size(), " and ", recv_counts.size()));
    }
    const size_t element = DTypeSize(input.dtype);
    std::vector<NcclMessage> group;
    size_t offsets[2] = {0, 0}, bytes = 0;
    for (int j = 0; j < size_; ++j) {
      const size_t sent = static_cast<size_t>(send_counts[j]) * element;
      const size_t received = static_cast<size_t>(recv_counts[j]) * element;
      if (send_counts[j] < 0 || recv_counts[j] < 0 || offsets[0] + sent > input.nbytes() ||
          offsets[1] + received > output.nbytes()) {
        return absl::InvalidArgumentError(
            absl::StrCat("all-to-all on ", name_, ": the counts exceed the buffers"));
      }
      if (sent > 0) group.push_back({true, static_cast<char*>(input.data) + offsets[0], sent, j});
      if (received > 0) {
        group.push_back({false, static_cast<char*>(output.data) + offsets[1], received, j});
      }
      offsets[0] += sent, offsets[1] += received, bytes += sent + received;
    }
    if (group.empty()) return absl::OkStatus();
    return Enqueue("all-to-all", bytes, members_,
                   [&](ncclComm_t c, cudaStream_t s) { return LaunchGroup(group, c, s); })
        .status();
  }

  // An all-reduce of one float the host waits for: every rank has queued everything before it.
  absl::Status Barrier() override {
    TensorView one{barrier_.get(), DType::kF32, Device{DeviceType::kCuda, job_->device}, {1}, {}};
    TITAN_ASSIGN_OR_RETURN(
        auto completion, Enqueue("barrier", 0, members_, [&](ncclComm_t c, cudaStream_t s) {
          return Nccl().AllReduce(one.data, one.data, 1, ncclFloat32, ncclSum, c, s);
        }));
    return completion->Wait();
  }

  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override {
    if (color < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("split of ", name_, ": color ", color, " must be >= 0"));
    }
    // MPI has no non-blocking split: a barrier first bounds the wait for the other ranks.
    MPI_Request request;
    int code = MPI_Ibarrier(mpi_, &request);
    if (code != MPI_SUCCESS) return mpi::MpiStatus(code);
    TITAN_RETURN_IF_ERROR(WaitMpi(request, job_->init_timeout,
                                  absl::StrCat("rank ", job_->world_rank, ": split of ", name_)));
    MPI_Comm part;
    TITAN_RETURN_IF_ERROR(mpi::MpiStatus(MPI_Comm_split(mpi_, color, key, &part)));
    TITAN_ASSIGN_OR_RETURN(
        std::unique_ptr<NcclCommunicator> split,
        Create(part, absl::StrCat(name_, "/split(", color, ")"), job_, compute_));
    return std::unique_ptr<Communicator>(std::move(split));
  }

  absl::StatusOr<std::string> DumpFlightRecord(absl::string_view reason) override {
    return job_->recorder.Dump(reason);
  }

 private:
  NcclCommunicator(MPI_Comm mpi, std::string name, std::shared_ptr<Job> job, Compute& compute,
                   std::shared_ptr<CommState> state, cudaEvent_t ready, int rank, int size)
      : mpi_(mpi),
        name_(std::move(name)),
        job_(std::move(job)),
        compute_(compute),
        state_(std::move(state)),
        ready_(ready),
        rank_(rank),
        size_(size),
        members_(mpi::WorldRanks(mpi, size)) {
    void* scratch = nullptr;
    if (cudaMalloc(&scratch, sizeof(float)) == cudaSuccess) {
      barrier_ = std::shared_ptr<void>(scratch, [](void* p) { cudaFree(p); });
    }
  }

  // `handed` set: the compute stream does not wait; *handed gets an event of the end.
  absl::StatusOr<std::shared_ptr<Completion>> Gather(const TensorView& input, TensorView output,
                                                     std::span<const EventHandle> after,
                                                     cudaEvent_t* handed) {
    TITAN_RETURN_IF_ERROR(Check("all-gather", output, input, size_));
    return Enqueue(
        "all-gather", output.nbytes(), members_,
        [&](ncclComm_t c, cudaStream_t s) {
          return Nccl().AllGather(input.data, output.data, input.nbytes(), ncclUint8, c, s);
        },
        after, handed);
  }

  // `messages` as one NCCL group (ncclGroupStart/End), queued as Enqueue does.
  absl::StatusOr<std::shared_ptr<Completion>> Group(std::span<const PeerMessage> messages,
                                                    std::span<const EventHandle> after,
                                                    cudaEvent_t* handed) {
    std::vector<NcclMessage> group;
    std::vector<int> peers;
    size_t bytes = 0;
    for (const PeerMessage& m : messages) {
      const bool send = m.kind == PeerMessage::Kind::kSend;
      const char* op = send ? "exchange (send)" : "exchange (recv)";
      TITAN_RETURN_IF_ERROR(Check(op, m.buffer, m.buffer, 1));
      TITAN_RETURN_IF_ERROR(CheckPeer(op, m.peer, false));
      group.push_back({send, m.buffer.data, m.buffer.nbytes(), m.peer});
      peers.push_back((*members_)[static_cast<size_t>(m.peer)]);
      bytes += m.buffer.nbytes();
    }
    return Enqueue(
        "exchange", bytes, std::make_shared<const std::vector<int>>(std::move(peers)),
        [&](ncclComm_t c, cudaStream_t s) { return LaunchGroup(group, c, s); }, after, handed);
  }

  absl::StatusOr<std::shared_ptr<Completion>> PointToPoint(absl::string_view op,
                                                           const TensorView& buffer, int peer,
                                                           int /*tag: NCCL matches in order*/) {
    TITAN_RETURN_IF_ERROR(Check(op, buffer, buffer, 1));
    TITAN_RETURN_IF_ERROR(CheckPeer(op, peer, false));
    const bool send = op == "send";
    auto peers = std::make_shared<const std::vector<int>>(
        std::vector<int>{(*members_)[static_cast<size_t>(peer)]});
    return Enqueue(op, buffer.nbytes(), std::move(peers), [&](ncclComm_t c, cudaStream_t s) {
      return send ? Nccl().Send(buffer.data, buffer.nbytes(), ncclUint8, peer, c, s)
                  : Nccl().Recv(buffer.data, buffer.nbytes(), ncclUint8, peer, c, s);
    });
  }

  absl::StatusOr<ncclDataType_t> Type(absl::string_view op, DType dtype, ReduceOp reduce) const {
    absl::StatusOr<ncclDataType_t> type = ReductionType(dtype, reduce);
    if (!type.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, " on ", name_, ": ", type.status().message()));
    }
    return type;
  }

  // `large` holds `chunks` times the elements of `small`, same dtype, both contiguous in the
  // memory of this rank's GPU.
  absl::Status Check(absl::string_view op, const TensorView& large, const TensorView& small,
                     int chunks) const {
    for (const TensorView* view : {&large, &small}) {
      if (view->device.type != DeviceType::kCuda || !view->is_contiguous()) {
        return absl::InvalidArgumentError(absl::StrCat(
            op, " on ", name_, ": nccl takes contiguous buffers in GPU memory, found ",
            view->device.type == DeviceType::kCpu ? "host memory" : "a non-contiguous view",
            " (job.device must be \"cuda\")"));
      }
    }
    if (large.dtype != small.dtype || large.numel() != small.numel() * chunks) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, " on ", name_, " (", size_, " ranks): expected ", chunks, " x ", small.numel(), " ",
          DTypeName(small.dtype), " elements, found ", large.numel(), " ", DTypeName(large.dtype)));
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

  // Queues one operation after the compute stream's work (or, when given, the events `after`),
  // makes the compute stream wait for it (unless `handed`, which then receives an event of its
  // end for the caller), records it and hands its completion to the watchdog.
  absl::StatusOr<std::shared_ptr<Completion>> Enqueue(
      absl::string_view op, size_t bytes, std::shared_ptr<const std::vector<int>> peers,
      const std::function<ncclResult_t(ncclComm_t, cudaStream_t)>& launch,
      std::span<const EventHandle> after = {}, cudaEvent_t* handed = nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string what = absl::StrCat("rank ", job_->world_rank, ": ", op, " #", sequence_ + 1,
                                          " on ", name_, " (", size_, " ranks)");
    auto unusable = [&] {
      return absl::AbortedError(
          absl::StrCat(what, ": the communicator is unusable after an earlier ", state_->broken()));
    };
    if (!state_->broken().empty()) return unusable();
    TITAN_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(job_->device), "cudaSetDevice"));
    auto compute = static_cast<cudaStream_t>(compute_.current_stream());
    const cudaStream_t stream = state_->stream();
    TITAN_RETURN_IF_ERROR(OrderBefore(CudaStreamCalls(), compute, stream, after, ready_));
    const int64_t sequence = ++sequence_;
    const int64_t handle = job_->recorder.Start(
        {sequence, std::string(op), name_, bytes, std::move(peers), Clock::now(), {}, {}});
    // Under the communicator's lock, so the watchdog cannot abort it halfway through the call.
    absl::Status launched;
    if (!state_->WithComm([&](ncclComm_t comm) {
          launched = WaitNccl(comm, launch(comm, stream), NcclCall(op), job_->Timeout());
        })) {
      job_->recorder.Finish(handle, "aborted");  // by the watchdog since the check above
      return unusable();
    }
    // The watchdog's event of the end, and the caller's when handed.
    cudaEvent_t done[2] = {nullptr, nullptr};
    const size_t events = handed != nullptr ? 2 : 1;
    for (size_t e = 0; e < events && launched.ok(); ++e) {
      launched = CudaStatus(cudaEventCreateWithFlags(&done[e], cudaEventDisableTiming),
                            "cudaEventCreateWithFlags");
    }
    if (launched.ok()) {
      launched = OrderAfter(CudaStreamCalls(), compute, stream, {done, events}, handed != nullptr);
    }
    if (!launched.ok()) {
      for (cudaEvent_t event : done) {
        if (event != nullptr) cudaEventDestroy(event);
      }
      job_->recorder.Finish(handle, "failed");
      std::string message = absl::StrCat(what, ": ", launched.message());
      state_->MarkBroken(message);  // the record before the abort, which may wait on the device
      absl::StatusOr<std::string> dumped = job_->recorder.Dump(message);
      state_->Abort(message);
      if (dumped.ok()) absl::StrAppend(&message, "; flight record in ", *dumped);
      return absl::Status(launched.code(), message);
    }
    if (handed != nullptr) *handed = done[1];
    auto completion = std::make_shared<Completion>();
    const std::chrono::seconds limit = job_->Timeout();
    job_->watchdog.Watch({state_, done[0], handle, std::chrono::steady_clock::now() + limit, limit,
                          what, completion});
    return completion;
  }

  static const char* NcclCall(absl::string_view op) {
    if (op == "all-reduce" || op == "barrier") return "ncclAllReduce";
    if (op == "reduce-scatter") return "ncclReduceScatter";
    if (op == "all-gather") return "ncclAllGather";
    if (op == "broadcast") return "ncclBroadcast";
    if (op == "exchange") return "ncclGroupEnd";
    return op == "send" ? "ncclSend" : "ncclRecv";
  }

  MPI_Comm mpi_;  // the same members, for splitting and bootstrapping
  std::string name_;
  std::shared_ptr<Job> job_;
  Compute& compute_;
  std::shared_ptr<CommState> state_;
  cudaEvent_t ready_;  // marks the compute stream's work before an operation that names none
  int rank_ = 0;
  int size_ = 1;
  std::shared_ptr<const std::vector<int>> members_;
  std::shared_ptr<void> barrier_;  // one float of device memory
  std::mutex mutex_;               // operations are queued in one order on every rank
  int64_t sequence_ = 0;
};

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class NcclComm : public CommPlugin {
 public:
  std::vector<ConfigKey> ConfigKeys() const override { return comm::CommSettings::Keys(); }
  absl::Status Configure(const ConfigView& config) override { return settings_.Configure(config); }
  // GPU buffers only, and point-to-point calls block in issue order on the plugin's one stream.
  CommTraits traits() const override {
    return {.stages_through_host = false, .unordered_point_to_point = false};
  }

  absl::StatusOr<std::unique_ptr<Communicator>> ConnectWorld(const JoinOptions& options) override {
    int devices = 0;
    cudaError_t counted = cudaGetDeviceCount(&devices);
    if (counted != cudaSuccess || devices == 0) {
      cudaGetLastError();  // clear the sticky "no device / no driver" error
      return absl::FailedPreconditionError(absl::StrCat(
          "comm.backend = \"nccl\": no CUDA device is visible to this rank (cudaGetDeviceCount: ",
          counted == cudaSuccess ? "0 devices" : cudaGetErrorString(counted),
          "); nccl moves GPU buffers only: use comm.backend = \"mpi\" on machines without GPUs"));
    }
    TITAN_RETURN_IF_ERROR(LoadNccl().status());
    if (options.device == nullptr || options.device->type() != DeviceType::kCuda ||
        options.device->compute() == nullptr) {
      return absl::FailedPreconditionError(
          "comm.backend = \"nccl\" needs job.device = \"cuda\": it moves buffers in GPU memory "
          "and queues its work after the cuda compute stream's");
    }
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      TITAN_RETURN_IF_ERROR(
          mpi::InitializeMpi(std::chrono::seconds(settings_.init_timeout_seconds)));
      std::atexit(FinalizeAtExit);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (job_ == nullptr) {
      int world_rank = 0, device = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
      TITAN_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&device), "cudaGetDevice"));
      job_ = std::make_shared<Job>(std::chrono::seconds(settings_.init_timeout_seconds),
                                   std::chrono::seconds(settings_.train_timeout_seconds),
                                   world_rank, static_cast<size_t>(settings_.trace_buf_size),
                                   settings_.TraceFolder(options), device);
    }
    // A private copy of MPI_COMM_WORLD; MPI_Comm_dup blocks until every rank arrives, so a
    // barrier first bounds that wait.
    MPI_Request request;
    int code = MPI_Ibarrier(MPI_COMM_WORLD, &request);
    if (code != MPI_SUCCESS) return mpi::MpiStatus(code);
    TITAN_RETURN_IF_ERROR(WaitMpi(request, job_->init_timeout,
                                  absl::StrCat("rank ", job_->world_rank, ": joining the job")));
    MPI_Comm world;
    TITAN_RETURN_IF_ERROR(mpi::MpiStatus(MPI_Comm_dup(MPI_COMM_WORLD, &world)));
    TITAN_ASSIGN_OR_RETURN(
        std::unique_ptr<NcclCommunicator> communicator,
        NcclCommunicator::Create(world, "world", job_, *options.device->compute()));
    return std::unique_ptr<Communicator>(std::move(communicator));
  }

 private:
  comm::CommSettings settings_;
  std::shared_ptr<Job> job_;
};

}  // namespace
}  // namespace titan::nccl

TITAN_PLUGIN(titan::CommPlugin, titan::nccl::NcclComm, "nccl", "0.1.0",
             "communicators over NCCL for GPU buffers, bootstrapped over MPI, with a watchdog")
