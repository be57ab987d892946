// Where plugins report what they did for the profiler's trace (profiling.enable_profiling). The
// core hands a sink to the plugins that do timed work of their own (a comm plugin through
// JoinOptions); it is null when profiling is off, and recording() is false outside the steps
// being profiled, so a plugin pays one branch per operation otherwise.
#ifndef TITAN_TRACE_H_
#define TITAN_TRACE_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace titan {

class TraceSink {
 public:
  virtual ~TraceSink() = default;

  // Whether the current step is being profiled.
  virtual bool recording() const = 0;
  // A finished span on the calling thread: `start_us` and `end_us` are microseconds since the
  // Unix epoch (std::chrono::system_clock); `args_json` is a JSON object ("{}" for none), shown
  // beside the span in a trace viewer.
  virtual void Span(absl::string_view name, absl::string_view category, int64_t start_us,
                    int64_t end_us, absl::string_view args_json) = 0;
};

}  // namespace titan

#endif  // TITAN_TRACE_H_
