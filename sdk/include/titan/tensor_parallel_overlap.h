// Asynchronous tensor parallelism (parallelism.enable_async_tensor_parallel): sequence parallel's
// all-gather before a column-parallel matmul and reduce-scatter after a row-parallel one, split
// into one chunk per tp rank and passed around a ring, so that each chunk's transfer is under
// way while the chunk in hand multiplies (TorchTitan's async TP, without SymmetricMemory). The
// tp plugin offers it through TensorParallelLayout::overlap; the model hands it the matmul of
// one chunk and keeps the synchronous collectives where a layer cannot be split by chunk, saying
// which layer and why in the log.
#ifndef TITAN_TENSOR_PARALLEL_OVERLAP_H_
#define TITAN_TENSOR_PARALLEL_OVERLAP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan {

// The communication of one layer's ring calls since the last TakeTimes, in seconds: `hidden`
// while the chunk in hand computed, `exposed` waited for with nothing left to compute.
struct OverlapTime {
  std::string layer;
  double hidden = 0, exposed = 0;
};

class TensorParallelOverlap {
 public:
  virtual ~TensorParallelOverlap() = default;

  // The work on chunk `chunk` (a tp rank's index: rows chunk x rows / size() on).
  using ConsumeChunk = std::function<absl::Status(int chunk)>;
  // Into `partial` (this rank's run's shape, f32): this rank's contribution to chunk `chunk`.
  using ProduceChunk = std::function<absl::Status(int chunk, const TensorView& partial)>;

  // Gathers every rank's `local` into `full` (size() chunks of local's elements, rank order) as
  // AllGather does, and calls consume(c) for each chunk c once it is in `full`, this rank's
  // first, while the next one travels. The same bytes as AllGather, so a matmul by chunk of rows
  // gives the synchronous path's result exactly.
  virtual absl::Status AllGatherMatmul(absl::string_view layer, const TensorView& local,
                                       const TensorView& full, const ConsumeChunk& consume) = 0;
  // Into `local` (f32): this rank's chunk of the sum over ranks of what produce(c, partial)
  // writes for every chunk c, each produced while the running sum of the one before travels.
  // The sum runs in ring order (rank c - 1, c - 2, ..., c), not the reduce-scatter's, so it
  // agrees with ReduceScatter to rounding (1e-6 relative in f32), not bit for bit.
  virtual absl::Status MatmulReduceScatter(absl::string_view layer, const ProduceChunk& produce,
                                           const TensorView& local) = 0;
  // Each layer's hidden and exposed communication since the last call, in first-use order.
  virtual std::vector<OverlapTime> TakeTimes() = 0;
};

}  // namespace titan

#endif  // TITAN_TENSOR_PARALLEL_OVERLAP_H_
