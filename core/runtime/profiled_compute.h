// The compute of a device other than the CPU, as the profiler sees it: every kernel forwards to
// the device's own compute; in a profiled step (profiling.enable_profiling) each kernel first
// waits for the work queued before it and then for itself, so its `kernel` span in the trace is
// the device's time for it. That step runs slower (nothing overlaps); other steps pay one branch
// a kernel. The CPU's compute traces its kernels itself and is not wrapped.
#ifndef TITAN_CORE_RUNTIME_PROFILED_COMPUTE_H_
#define TITAN_CORE_RUNTIME_PROFILED_COMPUTE_H_

#include <string>

#include "core/runtime/profiler.h"
#include "titan/compute.h"

namespace titan {

class ProfiledCompute : public Compute {
 public:
  explicit ProfiledCompute(Compute& inner) : inner_(inner) {}

  Device device() const override { return inner_.device(); }
  std::string Describe() const override { return inner_.Describe(); }
  StreamHandle current_stream() const override { return inner_.current_stream(); }
  absl::StatusOr<EventHandle> RecordEvent(StreamHandle stream) override {
    return inner_.RecordEvent(stream);
  }
  absl::Status StreamWaitEvent(StreamHandle stream, EventHandle event) override {
    return inner_.StreamWaitEvent(stream, event);
  }
  absl::Status SynchronizeEvent(EventHandle event) override {
    return inner_.SynchronizeEvent(event);
  }
  absl::Status Synchronize() override { return inner_.Synchronize(); }

 private:
  // `run` (the inner kernel), timed on the device while a step is being profiled.
  template <typename Run>
  absl::Status Timed(const char* name, Run run) {
    if (Profiler::Recording() == nullptr) return run();
    TITAN_RETURN_IF_ERROR(inner_.Synchronize());  // what came before is not this kernel's
    ScopedSpan span("kernel", name);
    absl::Status status = run();
    return status.ok() ? inner_.Synchronize() : status;
  }

#define TITAN_KERNEL(name, operands, names, check)          \
  absl::Status Run##name operands override {                \
    return Timed(#name, [&] { return inner_.name names; }); \
  }
#include "titan/compute_kernels.inc"
#undef TITAN_KERNEL

  Compute& inner_;
};

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_PROFILED_COMPUTE_H_
