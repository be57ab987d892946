// Live allocations for profiling.enable_memory_snapshot: every tensor storage and every buffer of
// the CPU device (what plugins such as fsdp allocate), with the arena it lives in and the tensors
// that arena holds, so a snapshot (at each profiled step, and when an allocation fails) tells
// what took the memory. Tracking starts when enabled and costs nothing before: an allocation then
// only reads one atomic flag. Allocations are keyed by their address.
#ifndef TITAN_CORE_RUNTIME_MEMORY_SNAPSHOT_H_
#define TITAN_CORE_RUNTIME_MEMORY_SNAPSHOT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan {

class MemoryTracker {
 public:
  static MemoryTracker& Get();

  // Starts tracking; an allocation that fails from now on writes
  // <folder>/rank<R>_oom_memory_snapshot.json.
  void Enable(std::string folder, int rank);
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // An allocation of `bytes` on `device` ("cpu", "cuda:0") in `arena` until Describe names its
  // arena and tensors; one already known (a storage the CPU device allocated) is kept as it is.
  void Add(const void* data, size_t bytes, std::string device, std::string arena);
  void Describe(const void* data, std::string arena,
                std::vector<std::pair<std::string, size_t>> tensors);
  void Remove(const void* data);

  size_t live_bytes() const;
  size_t peak_bytes() const;

  // The live allocations (name, bytes, device, arena), their total and the peak, as JSON.
  std::string SnapshotJson(absl::string_view reason) const;
  // Writes SnapshotJson to `path` (its folder created); returns `path`.
  absl::StatusOr<std::string> Write(const std::string& path, absl::string_view reason) const;
  // Called where an allocation of `bytes` on `device` failed; returns the snapshot written, or
  // empty when tracking is off.
  std::string OnOutOfMemory(size_t bytes, absl::string_view device);

  // Forgets everything and stops tracking (for tests).
  void Reset();

 private:
  struct Allocation {
    size_t bytes = 0;
    std::string device, arena;
    std::vector<std::pair<std::string, size_t>> tensors;
  };
  std::atomic<bool> enabled_{false};
  mutable std::mutex mutex_;
  std::map<const void*, Allocation> live_;
  size_t live_bytes_ = 0, peak_bytes_ = 0;
  std::string folder_;
  int rank_ = 0;
};

// `status` with where the snapshot written on the failure went, when one was (`snapshot` empty:
// none).
absl::Status WithSnapshot(const absl::Status& status, const std::string& snapshot);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_MEMORY_SNAPSHOT_H_
