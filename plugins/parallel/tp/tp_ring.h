// The tp plugin's async tensor parallelism (titan/tensor_parallel_overlap.h): the sequence-
// parallel all-gather and reduce-scatter as rings of per-rank chunks around the group, each
// step's transfers started before the chunk in hand is computed and waited for after it.
// Transfers are non-blocking sends and receives (MPI_Isend/MPI_Irecv on mpi); a communicator
// whose point-to-point runs in issue order (nccl) gets each step as one grouped exchange.
#ifndef TITAN_PLUGINS_PARALLEL_TP_TP_RING_H_
#define TITAN_PLUGINS_PARALLEL_TP_TP_RING_H_

#include <memory>
#include <string>
#include <vector>

#include "titan/communicator.h"
#include "titan/device.h"
#include "titan/tensor_parallel_overlap.h"

namespace titan::tp {

class TpRing : public TensorParallelOverlap {
 public:
  // Both outlive this object; `device` must have a compute.
  TpRing(Communicator& group, DevicePlugin& device) : group_(group), device_(device) {}

  absl::Status AllGatherMatmul(absl::string_view layer, const TensorView& local,
                               const TensorView& full, const ConsumeChunk& consume) override;
  absl::Status MatmulReduceScatter(absl::string_view layer, const ProduceChunk& produce,
                                   const TensorView& local) override;
  std::vector<OverlapTime> TakeTimes() override;

 private:
  // One ring step's transfers: a send of `send` to the next rank and a receive into `recv` from
  // the previous one (either may be empty).
  absl::StatusOr<std::unique_ptr<Communicator::Transfer>> Start(const TensorView& send, int to,
                                                                const TensorView& recv, int from);
  // Waits for `transfer`, counting the wait as exposed and the time since `started` before it
  // as hidden, for `layer`.
  absl::Status Finish(absl::string_view layer, Communicator::Transfer& transfer, double started);
  // f32 scratch of at least `floats` each: two running sums and a receive buffer.
  absl::Status Reserve(int64_t floats);

  Communicator& group_;
  DevicePlugin& device_;
  DeviceBuffer sums_[2], received_;
  int64_t reserved_ = 0;
  std::vector<OverlapTime> times_;
};

}  // namespace titan::tp

#endif  // TITAN_PLUGINS_PARALLEL_TP_TP_RING_H_
