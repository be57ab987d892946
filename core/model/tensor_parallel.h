// The communication of tensor parallelism with sequence parallel, as the Llama model runs it
// (Megatron-LM's scheme, TorchTitan's plan). Between blocks every tp rank holds a contiguous
// run of n / tp of the batch's n tokens (the flattened [batch, seq_len] rows: the residual
// stream and the norms work per token, so any split serves; position-dependent attention runs
// after the gather on whole sequences). Column-parallel projections need every token, so their
// input is gathered; row-parallel projections give each rank a partial sum for every token, so
// their output is reduce-scattered back to the rank's run. On one rank every call is free.
#ifndef TITAN_CORE_MODEL_TENSOR_PARALLEL_H_
#define TITAN_CORE_MODEL_TENSOR_PARALLEL_H_

#include <cstdint>

#include "titan/communicator.h"

namespace titan {

class TensorParallelGroup {
 public:
  // Buffers live on `device`.
  explicit TensorParallelGroup(Communicator* group = nullptr, Device device = {})
      : group_(group), device_(device) {}

  int size() const { return group_ == nullptr ? 1 : group_->size(); }
  int rank() const { return group_ == nullptr ? 0 : group_->rank(); }
  // The group's communicator; null on one rank.
  Communicator* communicator() const { return size() > 1 ? group_ : nullptr; }

  // Into full [n_local * size, width]: every rank's local [n_local, width], in rank order.
  // Returns full; on one rank returns `local` and copies nothing.
  absl::StatusOr<float*> GatherTokens(float* local, float* full, int64_t n_local,
                                      int64_t width) const;
  // Into local [n_local, width]: this rank's run of the sum over ranks of full [n_local * size,
  // width]. Returns local; on one rank returns `full` and copies nothing.
  absl::StatusOr<float*> ReduceScatterTokens(float* full, float* local, int64_t n_local,
                                             int64_t width) const;
  // In place: the sum over ranks; for the gradients of replicated weights (the norms), which
  // each rank computes from its own tokens only.
  absl::Status AllReduceSum(float* values, int64_t count) const;
  absl::Status AllReduceMax(float* values, int64_t count) const;

 private:
  TensorView Flat(float* data, int64_t count) const { return FlatF32(data, count, device_); }

  Communicator* group_;
  Device device_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_TENSOR_PARALLEL_H_
