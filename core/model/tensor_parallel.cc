#include "core/model/tensor_parallel.h"

#include <chrono>

namespace titan {
namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

absl::StatusOr<TensorView> TensorParallelGroup::GatherTokens(const TensorView& local,
                                                             const TensorView& full) const {
  if (size() == 1) return local;
  const auto start = std::chrono::steady_clock::now();
  TITAN_RETURN_IF_ERROR(group_->AllGather(local, full));
  synchronous_seconds_ += Since(start);
  return full;
}

absl::StatusOr<TensorView> TensorParallelGroup::ReduceScatterTokens(const TensorView& full,
                                                                    const TensorView& local) const {
  if (size() == 1) return full;
  const auto start = std::chrono::steady_clock::now();
  TITAN_RETURN_IF_ERROR(group_->ReduceScatter(full, local, ReduceOp::kSum));
  synchronous_seconds_ += Since(start);
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
