// The compute interface: every kernel the model, the train step, the optimizers and the parallel
// plugins run, implemented once per device (the CPU device in the core, accelerators in device
// plugins). The kernels are the rows of one table, titan/compute_kernels.inc, which says what
// each computes and how its operands are checked. Operands are TensorViews on the compute's
// device; a kernel handed one on another device, or of a dtype it does not take, returns an error
// naming the kernel, the operand and what it expected, the same on every backend. Work is issued
// in order on the current stream (the CPU runs it at once).
#ifndef TITAN_COMPUTE_H_
#define TITAN_COMPUTE_H_

#include <cstdint>
#include <span>
#include <string>

#include "titan/compute_operands.h"
#include "titan/compute_types.h"
#include "titan/kernel_table.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan {

class Compute {
 public:
  virtual ~Compute() = default;

  virtual Device device() const = 0;
  // One line naming the implementation of each kernel family that may differ by machine
  // (the CPU's bf16 GEMM: oneDNN on AVX512_BF16/AMX or an exact emulation), for the log.
  virtual std::string Describe() const = 0;

  // Every kernel of the table: Name(operands) runs the table's check of its operands against
  // this compute's device and, when they pass, the backend's RunName(operands).
#define TITAN_KERNEL(name, operands, names, check) \
  absl::Status name operands {                     \
    const DeviceType device_type = device().type;  \
    TITAN_RETURN_IF_ERROR(check);                  \
    return Run##name names;                        \
  }
#include "titan/compute_kernels.inc"
#undef TITAN_KERNEL

  // --- Streams and events ------------------------------------------------------------------
  virtual StreamHandle current_stream() const = 0;
  virtual absl::StatusOr<EventHandle> RecordEvent(StreamHandle stream) = 0;
  // Later work on `stream` starts after the event; the host is not blocked.
  virtual absl::Status StreamWaitEvent(StreamHandle stream, EventHandle event) = 0;
  // Blocks the host until the event is complete, then releases it.
  virtual absl::Status SynchronizeEvent(EventHandle event) = 0;
  virtual absl::Status Synchronize() = 0;

 private:
  // Each kernel's implementation, which a backend declares with titan/compute_overrides.inc.
  // Called only by the kernel above, so only with operands that passed its check.
#define TITAN_KERNEL(name, operands, names, check) virtual absl::Status Run##name operands = 0;
#include "titan/compute_kernels.inc"
#undef TITAN_KERNEL
};

}  // namespace titan

#endif  // TITAN_COMPUTE_H_
