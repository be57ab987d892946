#include "core/runtime/memory_snapshot.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/runtime/profiler.h"

namespace titan {

MemoryTracker& MemoryTracker::Get() {
  static MemoryTracker* tracker = new MemoryTracker();  // storages may outlive static destruction
  return *tracker;
}

void MemoryTracker::Enable(std::string folder, int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  folder_ = std::move(folder);
  rank_ = rank;
  enabled_.store(true);
}

void MemoryTracker::Add(const void* data, size_t bytes, std::string device, std::string arena) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, added] = live_.try_emplace(data);
  if (!added) return;
  it->second = Allocation{bytes, std::move(device), std::move(arena), {{"tensor", bytes}}};
  live_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
}

void MemoryTracker::Describe(const void* data, std::string arena,
                             std::vector<std::pair<std::string, size_t>> tensors) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(data);
  if (it == live_.end()) return;  // allocated before tracking started
  it->second.arena = std::move(arena);
  it->second.tensors = std::move(tensors);
}

void MemoryTracker::Remove(const void* data) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(data);
  if (it == live_.end()) return;
  live_bytes_ -= it->second.bytes;
  live_.erase(it);
}

size_t MemoryTracker::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_bytes_;
}

size_t MemoryTracker::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_bytes_;
}

std::string MemoryTracker::SnapshotJson(absl::string_view reason) const {
  nlohmann::json allocations = nlohmann::json::array();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [storage, a] : live_) {
    for (const auto& [name, bytes] : a.tensors) {
      allocations.push_back(
          {{"name", name}, {"bytes", bytes}, {"device", a.device}, {"arena", a.arena}});
    }
  }
  nlohmann::json doc = {{"rank", rank_},
                        {"reason", std::string(reason)},
                        {"time_us", NowMicros()},
                        {"live_bytes", live_bytes_},
                        {"peak_bytes", peak_bytes_},
                        {"allocations", std::move(allocations)}};
  return doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<std::string> MemoryTracker::Write(const std::string& path,
                                                 absl::string_view reason) const {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  std::ofstream out(path, std::ios::trunc);
  out << SnapshotJson(reason) << "\n";
  out.close();
  if (error || !out) {
    return absl::PermissionDeniedError(
        absl::StrCat("profiling.save_memory_snapshot_folder: cannot write ", path));
  }
  return path;
}

std::string MemoryTracker::OnOutOfMemory(size_t bytes, absl::string_view device) {
  if (!enabled()) return "";
  std::string path;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    path =
        (std::filesystem::path(folder_) / absl::StrCat("rank", rank_, "_oom_memory_snapshot.json"))
            .string();
  }
  absl::StatusOr<std::string> written = Write(
      path,
      absl::StrCat("out of memory: an allocation of ", bytes, " bytes on ", device, " failed"));
  return written.ok() ? *written : std::string(written.status().message());
}

absl::Status WithSnapshot(const absl::Status& status, const std::string& snapshot) {
  if (snapshot.empty()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), "; memory snapshot in ", snapshot));
}

void MemoryTracker::Reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  enabled_.store(false);
  live_.clear();
  live_bytes_ = peak_bytes_ = 0;
  folder_.clear();
  rank_ = 0;
}

}  // namespace titan
