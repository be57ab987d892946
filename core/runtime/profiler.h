// The step profiler (profiling.enable_profiling): every profiling.profile_freq-th step it records
// spans (module forward and backward, kernels, collectives, data loading, optimizer) on one track
// per thread and writes them as a Chrome trace-event JSON file, which Perfetto and
// chrome://tracing open: <folder>/iteration_<step>/rank<R>_trace.json.
//
// Off, or outside a profiled step, a ScopedSpan costs one relaxed atomic load and a branch.
#ifndef TITAN_CORE_RUNTIME_PROFILER_H_
#define TITAN_CORE_RUNTIME_PROFILER_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/status.h"
#include "titan/trace.h"

namespace titan {

// Microseconds since the Unix epoch: the flight recorder's clock, so both line up.
int64_t NowMicros();

class Profiler : public TraceSink {
 public:
  // Profiles the steps that are multiples of `freq` (>= 1), writing under `folder` as `rank`.
  Profiler(int64_t freq, std::string folder, int rank);

  // The profiler recording the current step, or null: what ScopedSpan asks.
  static Profiler* Recording() { return recording_.load(std::memory_order_relaxed); }

  // Starts recording when `step` is one to profile; returns whether it does.
  bool BeginStep(int64_t step);
  // Closes the step's span and writes its trace; returns the file written (empty when the step
  // was not profiled).
  absl::StatusOr<std::string> EndStep(int64_t step);

  bool recording() const override { return Recording() == this; }
  void Span(absl::string_view name, absl::string_view category, int64_t start_us, int64_t end_us,
            absl::string_view args_json) override;

  // The trace of the events recorded so far, as trace-event JSON.
  std::string TraceJson() const;
  int64_t freq() const { return freq_; }
  // The rank is known only once the job is joined, after the comm plugin got this sink.
  void set_rank(int rank) { rank_ = rank; }

 private:
  struct Event {
    std::string name, category, args_json;
    int64_t start_us, end_us;
    int thread;
  };
  static std::atomic<Profiler*> recording_;

  int64_t freq_;
  std::string folder_;
  int rank_;
  int64_t step_ = 0, step_start_us_ = 0;
  mutable std::mutex mutex_;  // the comm threads add spans beside the main thread
  std::vector<Event> events_;
};

// A span from construction to destruction on the calling thread, named `name` + `suffix` (joined
// only while recording, so a span outside profiled steps allocates nothing).
class ScopedSpan {
 public:
  ScopedSpan(const char* category, absl::string_view name, absl::string_view suffix = {})
      : profiler_(Profiler::Recording()) {
    if (profiler_ != nullptr) Start(category, name, suffix);
  }
  // A span whose name is made by `make_name()` only while recording (names with numbers).
  template <typename MakeName,
            typename = std::enable_if_t<std::is_invocable_r_v<std::string, MakeName>>>
  ScopedSpan(const char* category, MakeName&& make_name) : profiler_(Profiler::Recording()) {
    if (profiler_ != nullptr) Start(category, std::forward<MakeName>(make_name)(), {});
  }
  ~ScopedSpan() {
    if (profiler_ != nullptr) profiler_->Span(name_, category_, start_us_, NowMicros(), "{}");
  }
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  void Start(const char* category, absl::string_view name, absl::string_view suffix);
  Profiler* profiler_;
  const char* category_ = "";
  std::string name_;
  int64_t start_us_ = 0;
};

// Runs `call` inside a span: for one statement at a call site, e.g.
// TITAN_RETURN_IF_ERROR(Traced("sync", "wait_for_gradients", [&] { return plugin->Wait(); }));
template <typename Call>
auto Traced(const char* category, absl::string_view name, Call&& call) {
  ScopedSpan span(category, name);
  return std::forward<Call>(call)();
}

// The name shown for the calling thread's track in traces ("main", "comm", ...).
void NameThisThread(std::string name);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_PROFILER_H_
