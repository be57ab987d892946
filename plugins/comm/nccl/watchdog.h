// The nccl plugin's watchdog: NCCL work is queued on a stream and returns at once, so nothing
// waits on it to notice a peer that died or stalled. One thread per process polls every
// operation's completion event; one that has not completed within its deadline (or whose
// communicator reports an asynchronous error) marks its communicator unusable, dumps the flight
// record and aborts the communicator (ncclCommAbort), which makes NCCL's kernels return.
#ifndef TITAN_PLUGINS_COMM_NCCL_WATCHDOG_H_
#define TITAN_PLUGINS_COMM_NCCL_WATCHDOG_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "plugins/comm/common/flight_recorder.h"
#include "plugins/comm/nccl/cuda_status.h"
#include "plugins/comm/nccl/nccl_library.h"
#include "titan/status.h"

namespace titan::nccl {

// "nccl: <call> failed: <ncclGetErrorString> (<ncclGetLastError>)", ok for ncclSuccess.
absl::Status NcclStatus(ncclResult_t result, const char* call);

// One NCCL communicator and its stream, shared by the communicator object and the watchdog
// entries of its operations; destroyed (or left aborted) when the last of them goes.
// Every use of the handle holds one lock: the watchdog thread may abort the communicator while
// the training thread launches on it, and ncclCommAbort frees it, so the two must not overlap
// and nothing may touch the handle after the abort.
class CommState {
 public:
  CommState(ncclComm_t comm, cudaStream_t stream) : comm_(comm), stream_(stream) {}
  ~CommState();
  cudaStream_t stream() const { return stream_; }
  // Runs f(comm) under that lock; false, without running it, once the communicator is aborted.
  template <class F>
  bool WithComm(F f) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) return false;
    f(comm_);
    return true;
  }
  // Refuses later launches (broken() names `why`) without aborting yet.
  void MarkBroken(const std::string& why);
  // Aborts the communicator once; `why` says what broke it, unless it was marked broken before.
  void Abort(const std::string& why);
  // Empty while the communicator works.
  std::string broken() const;

 private:
  const ncclComm_t comm_;
  const cudaStream_t stream_;
  mutable std::mutex mutex_;
  bool aborted_ = false;
  std::string broken_;
};

// What the caller may wait on: set once the operation completed or failed.
struct Completion {
  enum State : int { kPending, kDone, kFailed };
  std::atomic<int> state{kPending};
  std::mutex mutex;
  absl::Status status;  // set before state leaves kPending
  void Set(absl::Status result);
  // Blocks until the operation completed or failed (the watchdog decides which in bounded time).
  absl::Status Wait();
};

class Watchdog {
 public:
  Watchdog(comm::FlightRecorder& recorder, int device);
  ~Watchdog();
  struct Entry {
    std::shared_ptr<CommState> comm;
    cudaEvent_t done = nullptr;  // owned by the watchdog from here
    int64_t handle = 0;          // the flight recorder's
    std::chrono::steady_clock::time_point deadline;
    std::chrono::seconds limit{0};
    std::string what;  // "rank R: all-reduce #N on world (4 ranks)"
    std::shared_ptr<Completion> completion;
  };
  void Watch(Entry entry);

 private:
  void Run();
  // Checks one entry; true when it is settled (and its event released).
  bool Settle(Entry& entry);

  comm::FlightRecorder& recorder_;
  int device_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Entry> entries_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace titan::nccl

#endif  // TITAN_PLUGINS_COMM_NCCL_WATCHDOG_H_
