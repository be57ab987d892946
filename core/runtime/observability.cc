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

std::string Under(const std::string& dump_folder, const std::string& folder) {
  return (std::filesystem::path(dump_folder) / folder).string();
}

}  // namespace

absl::StatusOr<TraceSink*> StartProfiling(const Recipe& recipe) {
  const ConfigView& profiling = recipe.section("profiling");
  TITAN_ASSIGN_OR_RETURN(std::string dump, recipe.section("job").GetString("dump_folder"));
  TITAN_ASSIGN_OR_RETURN(bool enable, profiling.GetBool("enable_profiling"));
  TITAN_ASSIGN_OR_RETURN(bool memory, profiling.GetBool("enable_memory_snapshot"));
  TITAN_ASSIGN_OR_RETURN(int64_t freq, profiling.GetInt("profile_freq"));
  TITAN_ASSIGN_OR_RETURN(std::string traces, profiling.GetString("save_traces_folder"));
  TITAN_ASSIGN_OR_RETURN(std::string snapshots, profiling.GetString("save_memory_snapshot_folder"));
  ProfilingSettings& s = Settings();
  s.freq = freq;
  s.traces_folder = Under(dump, traces);
  s.memory_folder = Under(dump, snapshots);
  s.memory_snapshot = memory;
  s.profiler = enable ? std::make_unique<Profiler>(freq, s.traces_folder, 0) : nullptr;
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

absl::StatusOr<std::unique_ptr<TensorBoardWriter>> OpenTensorBoard(const Recipe& recipe, int rank) {
  const ConfigView& metrics = recipe.section("metrics");
  TITAN_ASSIGN_OR_RETURN(bool enable, metrics.GetBool("enable_tensorboard"));
  TITAN_ASSIGN_OR_RETURN(bool all_ranks, metrics.GetBool("save_for_all_ranks"));
  if (!enable || (rank != 0 && !all_ranks)) return nullptr;
  TITAN_ASSIGN_OR_RETURN(std::string dump, recipe.section("job").GetString("dump_folder"));
  TITAN_ASSIGN_OR_RETURN(std::string folder, metrics.GetString("save_tb_folder"));
  // TorchTitan's layout: one folder per run, named by the minute it started.
  std::filesystem::path path = std::filesystem::path(dump) / folder /
                               absl::FormatTime("%Y%m%d-%H%M", absl::Now(), absl::LocalTimeZone());
  if (all_ranks) path /= absl::StrCat("rank_", rank);
  return TensorBoardWriter::Open(path.string());
}

void StopProfiling() {
  Settings() = ProfilingSettings();
  MemoryTracker::Get().Reset();
}

}  // namespace titan
