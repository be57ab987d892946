#include "plugins/comm/common/flight_recorder.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace titan::comm {
namespace {

int64_t Microseconds(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

}  // namespace

int64_t FlightRecorder::Start(CollectiveRecord record) {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t handle = first_handle_ + static_cast<int64_t>(records_.size());
  if (capacity_ == 0) return handle;
  if (records_.size() == capacity_) {
    records_.pop_front();
    ++first_handle_;
  }
  record.state = "running";
  records_.push_back(std::move(record));
  return handle;
}

void FlightRecorder::Finish(int64_t handle, absl::string_view state) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (handle < first_handle_) return;  // already dropped
  size_t index = static_cast<size_t>(handle - first_handle_);
  if (index >= records_.size()) return;
  records_[index].end = Clock::now();
  records_[index].state = std::string(state);
}

absl::StatusOr<std::string> FlightRecorder::Dump(absl::string_view reason) const {
  nlohmann::json entries = nlohmann::json::array();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const CollectiveRecord& r : records_) {
      nlohmann::json entry = {{"sequence", r.sequence},
                              {"op", r.op},
                              {"comm", r.comm},
                              {"bytes", r.bytes},
                              {"peers", r.peers ? *r.peers : std::vector<int>{}},
                              {"start_us", Microseconds(r.start)},
                              {"state", r.state}};
      entry["end_us"] =
          r.state == "running" ? nlohmann::json() : nlohmann::json(Microseconds(r.end));
      entries.push_back(std::move(entry));
    }
  }
  nlohmann::json doc = {{"rank", world_rank_},
                        {"reason", std::string(reason)},
                        {"written_us", Microseconds(Clock::now())},
                        {"collectives", std::move(entries)}};
  std::error_code error;
  std::filesystem::create_directories(folder_, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("flight recorder: cannot create folder ", folder_, ": ", error.message()));
  }
  std::string path = absl::StrCat(folder_, "/flight_recorder_rank", world_rank_, ".json");
  // Written under a temporary name so a reader never sees half a file.
  std::string temporary = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(temporary);
    out << doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out) return absl::InternalError(absl::StrCat("flight recorder: cannot write ", temporary));
  }
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("flight recorder: cannot rename ", temporary, ": ", error.message()));
  }
  return path;
}

}  // namespace titan::comm
