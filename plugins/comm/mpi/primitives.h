// The small pieces the MPI communicator is built from: element types, bf16 staging, turning
// MPI error codes into Status, waiting on a request against a deadline, and starting MPI.
// The nccl plugin bootstraps over MPI with them too.
#ifndef TITAN_PLUGINS_COMM_MPI_PRIMITIVES_H_
#define TITAN_PLUGINS_COMM_MPI_PRIMITIVES_H_

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/communicator.h"
#include "titan/status.h"

namespace titan::mpi {

// The MPI type a reduction runs in: f32 for f32 and bf16 (bf16 is staged in f32), the
// integer types as themselves; anything else cannot be reduced.
absl::StatusOr<MPI_Datatype> ReductionType(DType dtype, ReduceOp op);
MPI_Op ReductionOp(ReduceOp op);  // kAvg reduces as kSum, then divides

// bf16 <-> f32; the narrowing rounds to nearest even, as the model's kernels do.
std::vector<float> Bf16ToF32(const TensorView& view);
void F32ToBf16(const std::vector<float>& values, TensorView& view);

// "MPI error: <what MPI says>" for a failed call, ok for MPI_SUCCESS.
absl::Status MpiStatus(int code);

enum class WaitResult : uint8_t { kDone, kTimedOut, kFailed };

// Polls `request` with MPI_Test until it completes, fails or `deadline` passes; a request
// that times out is left active (MPI forbids freeing a pending collective). `between_polls`,
// when given, runs while the wait goes on (it serves flight-record requests).
WaitResult WaitUntil(MPI_Request& request, std::chrono::steady_clock::time_point deadline,
                     int& error_code, const std::function<void()>& between_polls = nullptr);

// MPI_Init_thread at MPI_THREAD_MULTIPLE on a thread of its own, so that waiting for every
// rank of the job to start is bounded by `timeout` (comm.init_timeout_seconds).
absl::Status InitializeMpi(std::chrono::seconds timeout);

// The MPI_COMM_WORLD ranks of a communicator's members, in its rank order.
std::shared_ptr<const std::vector<int>> WorldRanks(MPI_Comm comm, int size);

}  // namespace titan::mpi

#endif  // TITAN_PLUGINS_COMM_MPI_PRIMITIVES_H_
