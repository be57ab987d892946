#include "plugins/comm/nccl/watchdog.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace titan::nccl {

absl::Status NcclStatus(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return absl::OkStatus();
  const char* last = Nccl().GetLastError(nullptr);
  return absl::InternalError(absl::StrCat(
      "nccl: ", call, " failed: ", Nccl().GetErrorString(result),
      last != nullptr && *last != '\0' ? absl::StrCat(" (", last, ")") : std::string()));
}

CommState::~CommState() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_) {
    // Flush what is queued, then release; a communicator that will not finish is aborted.
    cudaStreamSynchronize(stream_);
    ncclResult_t state = Nccl().CommFinalize(comm_);
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (state == ncclInProgress && std::chrono::steady_clock::now() < limit) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      Nccl().CommGetAsyncError(comm_, &state);
    }
    if (state == ncclSuccess) {
      Nccl().CommDestroy(comm_);
    } else {
      Nccl().CommAbort(comm_);
    }
  }
  cudaStreamDestroy(stream_);
}

void CommState::MarkBroken(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (broken_.empty()) broken_ = why;
}

void CommState::Abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (broken_.empty()) broken_ = why;
  if (aborted_) return;
  aborted_ = true;
  Nccl().CommAbort(comm_);
}

std::string CommState::broken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

void Completion::Set(absl::Status result) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    status = std::move(result);
  }
  state.store(status.ok() ? kDone : kFailed);
}

absl::Status Completion::Wait() {
  while (state.load() == kPending) std::this_thread::sleep_for(std::chrono::microseconds(50));
  std::lock_guard<std::mutex> lock(mutex);
  return status;
}

Watchdog::Watchdog(comm::FlightRecorder& recorder, int device)
    : recorder_(recorder), device_(device), thread_([this] { Run(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::Watch(Entry entry) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(std::move(entry));
  }
  wake_.notify_all();
}

bool Watchdog::Settle(Entry& entry) {
  cudaError_t query = cudaEventQuery(entry.done);
  absl::Status failure;
  std::string state;
  if (query == cudaSuccess) {
    recorder_.Finish(entry.handle, "completed");
    cudaEventDestroy(entry.done);
    if (entry.completion) entry.completion->Set(absl::OkStatus());
    return true;
  }
  // Asked before `broken`, so an abort in between still reads as one; not asked at all once
  // the communicator is aborted (ncclCommAbort freed it).
  ncclResult_t async = ncclSuccess;
  entry.comm->WithComm([&](ncclComm_t comm) { Nccl().CommGetAsyncError(comm, &async); });
  const std::string broken = entry.comm->broken();
  if (!broken.empty()) {
    state = "aborted";
    failure = absl::AbortedError(
        absl::StrCat(entry.what, ": the communicator was aborted after ", broken));
  } else if (query != cudaErrorNotReady) {
    state = "failed";
    failure = absl::InternalError(
        absl::StrCat(entry.what, " failed: ", CudaStatus(query, "cudaEventQuery").message()));
  } else if (async != ncclSuccess && async != ncclInProgress) {
    state = "failed";
    failure = absl::InternalError(absl::StrCat(
        entry.what, " failed: ", NcclStatus(async, "ncclCommGetAsyncError").message()));
  } else if (std::chrono::steady_clock::now() >= entry.deadline) {
    state = "timed out";
    failure = absl::DeadlineExceededError(
        absl::StrCat(entry.what, " did not complete within ", entry.limit.count(),
                     "s (a peer died or stalled); ncclCommAbort aborted the communicator"));
  } else {
    return false;
  }
  recorder_.Finish(entry.handle, state);
  if (state != "aborted") {
    // The record first: ncclCommAbort frees device memory, which waits for the device to go idle,
    // and so for the very work that stalled.
    entry.comm->MarkBroken(std::string(failure.message()));
    absl::StatusOr<std::string> dumped = recorder_.Dump(failure.message());
    entry.comm->Abort(std::string(failure.message()));
    std::fprintf(stderr, "%s; flight record %s\n", std::string(failure.message()).c_str(),
                 dumped.ok() ? dumped->c_str() : std::string(dumped.status().message()).c_str());
    if (dumped.ok()) {
      failure = absl::Status(failure.code(),
                             absl::StrCat(failure.message(), "; flight record in ", *dumped));
    }
  }
  cudaEventDestroy(entry.done);  // released by CUDA once the aborted work drains
  if (entry.completion) entry.completion->Set(failure);
  return true;
}

void Watchdog::Run() {
  cudaSetDevice(device_);  // the events and streams watched live on the rank's device
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || !entries_.empty(); });
    if (entries_.empty() && stop_) return;
    std::deque<Entry> watched;
    watched.swap(entries_);
    lock.unlock();
    std::deque<Entry> open;
    for (Entry& entry : watched) {
      if (!Settle(entry)) open.push_back(std::move(entry));
    }
    if (!open.empty()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    lock.lock();
    // Older entries first, so each communicator's operations settle in order.
    for (auto it = open.rbegin(); it != open.rend(); ++it) entries_.push_front(std::move(*it));
  }
}

}  // namespace titan::nccl
