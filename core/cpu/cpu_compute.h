// The CPU device's compute: the reference implementation of titan/compute.h, on the kernels in
// core/tensor (BLAS for GEMMs, OpenMP for the rest). Every other backend is tested against it.
#ifndef TITAN_CORE_CPU_CPU_COMPUTE_H_
#define TITAN_CORE_CPU_CPU_COMPUTE_H_

#include <string>

#include "titan/compute.h"

namespace titan {

class CpuCompute : public Compute {
 public:
  // The process's one CPU compute.
  static CpuCompute& Get();

  Device device() const override { return Device{DeviceType::kCpu, 0}; }
  std::string Describe() const override;

  StreamHandle current_stream() const override { return nullptr; }
  absl::StatusOr<EventHandle> RecordEvent(StreamHandle stream) override;
  absl::Status StreamWaitEvent(StreamHandle stream, EventHandle event) override;
  absl::Status SynchronizeEvent(EventHandle event) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
#include "titan/compute_overrides.inc"
};

}  // namespace titan

#endif  // TITAN_CORE_CPU_CPU_COMPUTE_H_
