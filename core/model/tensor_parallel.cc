#include "core/model/tensor_parallel.h"

namespace titan {

absl::StatusOr<TensorView> TensorParallelGroup::GatherTokens(const TensorView& local,
                                                             const TensorView& full) const {
  if (size() == 1) return local;
  TITAN_RETURN_IF_ERROR(group_->AllGather(local, full));
  return full;
}

absl::StatusOr<TensorView> TensorParallelGroup::ReduceScatterTokens(const TensorView& full,
                                                                    const TensorView& local) const {
  if (size() == 1) return full;
  TITAN_RETURN_IF_ERROR(group_->ReduceScatter(full, local, ReduceOp::kSum));
  return local;
}

absl::Status TensorParallelGroup::AllReduceSum(const TensorView& values) const {
  if (size() == 1) return absl::OkStatus();
  return group_->AllReduce(values, ReduceOp::kSum);
}

absl::Status TensorParallelGroup::AllReduceMax(const TensorView& values) const {
  if (size() == 1) return absl::OkStatus();
  return group_->AllReduce(values, ReduceOp::kMax);
}

}  // namespace titan
