#include "core/runtime/observability.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/runtime/memory_snapshot.h"
#include "core/runtime/profiler.h"

namespace titan {
namespace {

struct ProfilingSettings {
  std::unique_ptr<Profiler> profiler;  // with enable_profiling
  bool memory_snapshot = false;
  int64_t freq = 10;
  std::string traces_folder, memory_folder;
  int rank = 0;
};

ProfilingSettings& Settings() {
  static ProfilingSettings* settings = new ProfilingSettings();
  return *settings;
}

}  // namespace

absl::StatusOr<TraceSink*> StartProfiling(const ProfilingOptions& options) {
  ProfilingSettings& s = Settings();
  s.freq = options.freq;
  s.traces_folder = options.traces_folder;
  s.memory_folder = options.memory_folder;
  s.memory_snapshot = options.memory_snapshots;
  s.profiler =
      options.traces ? std::make_unique<Profiler>(options.freq, s.traces_folder, 0) : nullptr;
  return s.profiler.get();
}

void SetProfilingRank(int rank) {
  ProfilingSettings& s = Settings();
  s.rank = rank;
  if (s.profiler != nullptr) s.profiler->set_rank(rank);
  if (s.memory_snapshot) MemoryTracker::Get().Enable(s.memory_folder, rank);
}

void BeginProfiledStep(int64_t step) {
  ProfilingSettings& s = Settings();
  if (s.profiler != nullptr) s.profiler->BeginStep(step);
}

absl::Status EndProfiledStep(int64_t step, Communicator& world) {
  ProfilingSettings& s = Settings();
  if (s.profiler != nullptr && s.profiler->recording()) {
    TITAN_ASSIGN_OR_RETURN(std::string trace, s.profiler->EndStep(step));
    absl::StatusOr<std::string> record =
        world.DumpFlightRecord(absl::StrCat("profiled step ", step));
    spdlog::info("[profile] trace of step {} in {}{}", step, trace,
                 record.ok() ? absl::StrCat("; flight record in ", *record) : "");
  }
  if (s.memory_snapshot && step % s.freq == 0) {
    const std::string path =
        (std::filesystem::path(s.memory_folder) / absl::StrCat("iteration_", step) /
         absl::StrCat("rank", s.rank, "_memory_snapshot.json"))
            .string();
    TITAN_ASSIGN_OR_RETURN(std::string written,
                           MemoryTracker::Get().Write(path, absl::StrCat("step ", step)));
    spdlog::info("[profile] memory snapshot of step {} in {}: {:.1f} MiB live, peak {:.1f} MiB",
                 step, written, static_cast<double>(MemoryTracker::Get().live_bytes()) / (1 << 20),
                 static_cast<double>(MemoryTracker::Get().peak_bytes()) / (1 << 20));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TensorBoardWriter>> OpenTensorBoard(
    const TensorBoardOptions& options, int rank) {
  if (!options.enable || (rank != 0 && !options.all_ranks)) return nullptr;
  // TorchTitan's layout: one folder per run, named by the minute it started.
  std::filesystem::path path = std::filesystem::path(options.folder) /
                               absl::FormatTime("%Y%m%d-%H%M", absl::Now(), absl::LocalTimeZone());
  if (options.all_ranks) path /= absl::StrCat("rank_", rank);
  return TensorBoardWriter::Open(path.string());
}

void StopProfiling() {
  Settings() = ProfilingSettings();
  MemoryTracker::Get().Reset();
}

}  // namespace titan
