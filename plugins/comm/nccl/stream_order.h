// Where an NCCL operation sits between the compute stream and the communicator's own stream.
// Before it, the communicator's stream waits for the events of the buffers the call reads and
// writes (titan/communicator.h, StreamOrder), or, when the caller names none, for all the work
// queued on the compute stream so far. After it, the operation's end is recorded on the
// communicator's stream, and the compute stream waits for it at once unless the caller started
// the operation to wait for it later (Transfer::Wait). The CUDA calls come through a table so
// that a test can check the order with fakes, without a GPU (stream_order_test.cc).
#ifndef TITAN_PLUGINS_COMM_NCCL_STREAM_ORDER_H_
#define TITAN_PLUGINS_COMM_NCCL_STREAM_ORDER_H_

#include <cuda_runtime.h>

#include <span>

#include "titan/compute.h"
#include "titan/status.h"

namespace titan::nccl {

struct StreamCalls {
  cudaError_t (*record)(cudaEvent_t event, cudaStream_t stream);
  cudaError_t (*wait)(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
};
// cudaEventRecord and cudaStreamWaitEvent.
const StreamCalls& CudaStreamCalls();

// `comm` waits for each event of `after` (the cuda compute's events are cudaEvent_t), or for
// `ready` recorded now on `compute` when `after` is empty.
absl::Status OrderBefore(const StreamCalls& calls, cudaStream_t compute, cudaStream_t comm,
                         std::span<const EventHandle> after, cudaEvent_t ready);

// Records each event of `done` on `comm`, after the operation; `compute` then waits for the
// first unless `defer`.
absl::Status OrderAfter(const StreamCalls& calls, cudaStream_t compute, cudaStream_t comm,
                        std::span<const cudaEvent_t> done, bool defer);

}  // namespace titan::nccl

#endif  // TITAN_PLUGINS_COMM_NCCL_STREAM_ORDER_H_
