#include "core/model/tensor_parallel.h"

namespace titan {

absl::StatusOr<float*> TensorParallelGroup::GatherTokens(float* local, float* full, int64_t n_local,
                                                         int64_t width) const {
  if (size() == 1) return local;
  TITAN_RETURN_IF_ERROR(
      group_->AllGather(Flat(local, n_local * width), Flat(full, n_local * width * size())));
  return full;
}

absl::StatusOr<float*> TensorParallelGroup::ReduceScatterTokens(float* full, float* local,
                                                                int64_t n_local,
                                                                int64_t width) const {
  if (size() == 1) return full;
  TITAN_RETURN_IF_ERROR(group_->ReduceScatter(Flat(full, n_local * width * size()),
                                              Flat(local, n_local * width), ReduceOp::kSum));
  return local;
}

absl::Status TensorParallelGroup::AllReduceSum(float* values, int64_t count) const {
  if (size() == 1) return absl::OkStatus();
  return group_->AllReduce(Flat(values, count), ReduceOp::kSum);
}

absl::Status TensorParallelGroup::AllReduceMax(float* values, int64_t count) const {
  if (size() == 1) return absl::OkStatus();
  return group_->AllReduce(Flat(values, count), ReduceOp::kMax);
}

}  // namespace titan
