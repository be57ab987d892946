#include "plugins/comm/nccl/stream_order.h"

#include "plugins/comm/nccl/cuda_status.h"

namespace titan::nccl {
namespace {

cudaError_t WaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  return cudaStreamWaitEvent(stream, event, flags);
}
cudaError_t RecordEvent(cudaEvent_t event, cudaStream_t stream) {
  return cudaEventRecord(event, stream);
}

}  // namespace

const StreamCalls& CudaStreamCalls() {
  static const StreamCalls calls{RecordEvent, WaitEvent};
  return calls;
}

absl::Status OrderBefore(const StreamCalls& calls, cudaStream_t compute, cudaStream_t comm,
                         std::span<const EventHandle> after, cudaEvent_t ready) {
  if (after.empty()) {
    TITAN_RETURN_IF_ERROR(CudaStatus(calls.record(ready, compute), "cudaEventRecord"));
    return CudaStatus(calls.wait(comm, ready, 0), "cudaStreamWaitEvent");
  }
  for (EventHandle event : after) {
    TITAN_RETURN_IF_ERROR(
        CudaStatus(calls.wait(comm, static_cast<cudaEvent_t>(event), 0), "cudaStreamWaitEvent"));
  }
  return absl::OkStatus();
}

absl::Status OrderAfter(const StreamCalls& calls, cudaStream_t compute, cudaStream_t comm,
                        std::span<const cudaEvent_t> done, bool defer) {
  for (cudaEvent_t event : done) {
    TITAN_RETURN_IF_ERROR(CudaStatus(calls.record(event, comm), "cudaEventRecord"));
  }
  if (defer || done.empty()) return absl::OkStatus();
  return CudaStatus(calls.wait(compute, done.front(), 0), "cudaStreamWaitEvent");
}

}  // namespace titan::nccl
