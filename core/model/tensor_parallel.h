// The communication of tensor parallelism with sequence parallel, as the decoder modules run it
// (Megatron-LM's scheme, TorchTitan's plan). Between blocks every tp rank holds a contiguous
// run of n / tp of the batch's n tokens (the flattened [batch, seq_len] rows: the residual
// stream and the norms work per token, so any split serves; position-dependent attention runs
// after the gather on whole sequences). Column-parallel projections need every token, so their
// input is gathered; row-parallel projections give each rank a partial sum for every token, so
// their output is reduce-scattered back to the rank's run. On one rank every call is free.
#ifndef TITAN_CORE_MODEL_TENSOR_PARALLEL_H_
#define TITAN_CORE_MODEL_TENSOR_PARALLEL_H_

#include <cstdint>
#include <utility>

#include "titan/communicator.h"
#include "titan/tensor_parallel_overlap.h"

namespace titan {

class TensorParallelGroup {
 public:
  explicit TensorParallelGroup(Communicator* group = nullptr,
                               TensorParallelOverlap* overlap = nullptr)
      : group_(group), overlap_(overlap) {}

  int size() const { return group_ == nullptr ? 1 : group_->size(); }
  int rank() const { return group_ == nullptr ? 0 : group_->rank(); }
  // The group's communicator; null on one rank.
  Communicator* communicator() const { return size() > 1 ? group_ : nullptr; }
  // The tp plugin's rings under async tensor parallelism; null on one rank or without it.
  TensorParallelOverlap* overlap() const { return size() > 1 ? overlap_ : nullptr; }

  // Into `full` (size() times local's elements): every rank's `local`, in rank order. Returns
  // full; on one rank returns `local` and copies nothing.
  absl::StatusOr<TensorView> GatherTokens(const TensorView& local, const TensorView& full) const;
  // Into `local`: this rank's run of the sum over ranks of `full` (size() times local's
  // elements). Returns local; on one rank returns `full` and copies nothing.
  absl::StatusOr<TensorView> ReduceScatterTokens(const TensorView& full,
                                                 const TensorView& local) const;
  // In place: the sum over ranks; for the gradients of replicated weights (the norms), which
  // each rank computes from its own tokens only.
  absl::Status AllReduceSum(const TensorView& values) const;
  absl::Status AllReduceMax(const TensorView& values) const;
  // Seconds spent in GatherTokens and ReduceScatterTokens (all of it exposed: nothing computes
  // meanwhile) since the last call; what async tensor parallelism's rings compare with.
  double TakeSynchronousSeconds() const { return std::exchange(synchronous_seconds_, 0.0); }

 private:
  Communicator* group_;
  TensorParallelOverlap* overlap_;
  mutable double synchronous_seconds_ = 0;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_TENSOR_PARALLEL_H_
