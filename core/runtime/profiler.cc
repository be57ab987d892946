#include "core/runtime/profiler.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace titan {
namespace {

// Threads are numbered as they first record, so a trace's track ids stay small and stable.
std::atomic<int> next_thread{0};
thread_local int this_thread = -1;

struct ThreadNames {
  std::mutex mutex;
  std::map<int, std::string> names;
};
ThreadNames& Names() {
  static ThreadNames* names = new ThreadNames();  // threads may outlive static destruction
  return *names;
}

int ThisThread() {
  if (this_thread < 0) this_thread = next_thread.fetch_add(1);
  return this_thread;
}

std::string ThreadName(int thread) {
  std::lock_guard<std::mutex> lock(Names().mutex);
  auto it = Names().names.find(thread);
  return it != Names().names.end() ? it->second : absl::StrCat("thread ", thread);
}

}  // namespace

std::atomic<Profiler*> Profiler::recording_{nullptr};

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void NameThisThread(std::string name) {
  const int thread = ThisThread();
  std::lock_guard<std::mutex> lock(Names().mutex);
  Names().names[thread] = std::move(name);
}

Profiler::Profiler(int64_t freq, std::string folder, int rank)
    : freq_(freq < 1 ? 1 : freq), folder_(std::move(folder)), rank_(rank) {}

bool Profiler::BeginStep(int64_t step) {
  if (step % freq_ != 0) return false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.clear();
    step_ = step;
  }
  {
    std::lock_guard<std::mutex> lock(Names().mutex);
    Names().names.try_emplace(ThisThread(), "main");
  }
  step_start_us_ = NowMicros();
  recording_.store(this, std::memory_order_relaxed);
  return true;
}

absl::StatusOr<std::string> Profiler::EndStep(int64_t step) {
  if (!recording() || step != step_) return std::string();
  Span(absl::StrCat("step ", step), "step", step_start_us_, NowMicros(),
       absl::StrCat("{\"step\": ", step, "}"));
  recording_.store(nullptr, std::memory_order_relaxed);
  const std::filesystem::path dir =
      std::filesystem::path(folder_) / absl::StrCat("iteration_", step);
  const std::string path = (dir / absl::StrCat("rank", rank_, "_trace.json")).string();
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  std::ofstream out(path, std::ios::trunc);
  out << TraceJson();
  out.close();
  if (error || !out) {
    return absl::PermissionDeniedError(absl::StrCat(
        "profiling.save_traces_folder: cannot write the trace of step ", step, " to ", path));
  }
  return path;
}

void Profiler::Span(absl::string_view name, absl::string_view category, int64_t start_us,
                    int64_t end_us, absl::string_view args_json) {
  Event event{std::string(name), std::string(category), std::string(args_json), start_us, end_us,
              ThisThread()};
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
}

std::string Profiler::TraceJson() const {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"ph", "M"},
                    {"name", "process_name"},
                    {"pid", rank_},
                    {"args", {{"name", absl::StrCat("rank ", rank_)}}}});
  events.push_back({{"ph", "M"},
                    {"name", "process_sort_index"},
                    {"pid", rank_},
                    {"args", {{"sort_index", rank_}}}});
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<int, bool> threads;
  for (const Event& e : events_) {
    threads[e.thread] = true;
    nlohmann::json args = nlohmann::json::parse(e.args_json, nullptr, /*allow_exceptions=*/false);
    if (!args.is_object()) args = {{"args", e.args_json}};  // a plugin's malformed text, kept
    events.push_back({{"ph", "X"},
                      {"name", e.name},
                      {"cat", e.category},
                      {"pid", rank_},
                      {"tid", e.thread},
                      {"ts", e.start_us},
                      {"dur", e.end_us - e.start_us},
                      {"args", std::move(args)}});
  }
  for (const auto& [thread, unused] : threads) {
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", rank_},
                      {"tid", thread},
                      {"args", {{"name", ThreadName(thread)}}}});
  }
  nlohmann::json trace = {{"traceEvents", std::move(events)},
                          {"displayTimeUnit", "ms"},
                          {"otherData", {{"rank", rank_}, {"step", step_}}}};
  return trace.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void ScopedSpan::Start(const char* category, absl::string_view name, absl::string_view suffix) {
  category_ = category;
  name_ = absl::StrCat(name, suffix);
  start_us_ = NowMicros();
}

}  // namespace titan
