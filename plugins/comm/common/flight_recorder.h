// Each rank's last N collectives, kept so that a hang or a crash can be diagnosed after the
// fact: which collective every rank was in, with whom, and for how long. Shared by the comm
// plugins (mpi, nccl), each compiling it in.
#ifndef TITAN_PLUGINS_COMM_COMMON_FLIGHT_RECORDER_H_
#define TITAN_PLUGINS_COMM_COMMON_FLIGHT_RECORDER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan::comm {

using Clock = std::chrono::system_clock;

struct CollectiveRecord {
  int64_t sequence = 0;  // per communicator, counted from 1
  std::string op;        // "all-reduce", "send", ...
  std::string comm;      // the communicator's name, e.g. "world" or "world/split(1)"
  size_t bytes = 0;
  std::shared_ptr<const std::vector<int>> peers;  // world ranks taking part
  Clock::time_point start;
  Clock::time_point end;  // unset while running
  std::string state;      // "running", "completed", "timed out", "failed"
};

class FlightRecorder {
 public:
  FlightRecorder(size_t capacity, std::string folder, int world_rank)
      : capacity_(capacity), folder_(std::move(folder)), world_rank_(world_rank) {}

  // Returns a handle for Finish; the oldest record is dropped when full.
  int64_t Start(CollectiveRecord record);
  void Finish(int64_t handle, absl::string_view state);

  // Writes <folder>/flight_recorder_rank<R>.json and returns its path.
  absl::StatusOr<std::string> Dump(absl::string_view reason) const;

 private:
  size_t capacity_;
  std::string folder_;
  int world_rank_;
  mutable std::mutex mutex_;  // Dump may run from an error path on another thread
  std::deque<CollectiveRecord> records_;
  int64_t first_handle_ = 0;  // handle of records_.front()
};

}  // namespace titan::comm

#endif  // TITAN_PLUGINS_COMM_COMMON_FLIGHT_RECORDER_H_
