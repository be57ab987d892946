#include "plugins/parallel/fsdp/flat_unit.h"

#include <algorithm>

namespace titan::fsdp {

absl::StatusOr<DeviceBuffer> BufferPool::Take(int64_t count, bool zeroed) {
  DeviceBuffer buffer;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find_if(free_.begin(), free_.end(),
                           [count](const DeviceBuffer& b) { return b.size() == count; });
    if (it != free_.end()) {
      buffer = std::move(*it);
      free_.erase(it);
    }
  }
  if (buffer.size() != count) return DeviceBuffer::Allocate(*device_, count);  // zero-filled
  if (zeroed) TITAN_RETURN_IF_ERROR(device_->compute()->Fill(buffer.view(), 0.0f));
  return buffer;
}

void BufferPool::Give(DeviceBuffer buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(std::move(buffer));
}

FlatUnit::FlatUnit(std::vector<Parameter*> parameters, int degree, int rank, int64_t local_offset,
                   DevicePlugin& device)
    : parameters_(std::move(parameters)),
      degree_(degree),
      rank_(rank),
      local_offset_(local_offset),
      compute_(*device.compute()),
      device_(compute_.device()) {
  int64_t total = 0;
  for (const Parameter* p : parameters_) {
    offsets_.push_back(total);
    total += p->value.numel();
  }
  shard_ = (total + degree - 1) / degree;
}

absl::Status FlatUnit::Shard(float* local, float* local_grad, std::vector<ParamSegment>& segments) {
  const int64_t begin = shard_ * rank_, end = begin + shard_;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Parameter& p = *parameters_[i];
    const int64_t first = std::max(begin, offsets_[i]);
    const int64_t last = std::min(end, offsets_[i] + p.value.numel());
    const int64_t count = std::max<int64_t>(0, last - first);
    float* value = local + local_offset_ + (first - begin);
    float* grad = local_grad + local_offset_ + (first - begin);
    if (count > 0) {
      TITAN_RETURN_IF_ERROR(compute_.Copy(
          Flat(p.value.data_as<const float>() + (first - offsets_[i]), count), Flat(value, count)));
      segments.push_back({local_offset_ + (first - begin), count, p.weight_decay});
    }
    p.shard = Flat(value, count);
    p.shard_grad = Flat(grad, count);
    p.shard_offset = count > 0 ? first - offsets_[i] : 0;
    p.placements[static_cast<int>(MeshDim::kDpShard)] = {Placement::Kind::kFlatShard, 0};
    p.value.data = nullptr;
    p.grad.data = nullptr;
  }
  return absl::OkStatus();
}

absl::Status FlatUnit::Gather(Communicator& shard_group, const float* local, float* full) const {
  return shard_group.AllGather(Flat(local + local_offset_, shard_), Flat(full, padded_count()));
}

absl::Status FlatUnit::ReduceGradients(Communicator& shard_group, Communicator* replicas,
                                       const float* full_grad, float* scratch,
                                       float* local_grad) const {
  TITAN_RETURN_IF_ERROR(shard_group.ReduceScatter(Flat(full_grad, padded_count()),
                                                  Flat(scratch, shard_), ReduceOp::kAvg));
  if (replicas != nullptr) {
    TITAN_RETURN_IF_ERROR(replicas->AllReduce(Flat(scratch, shard_), ReduceOp::kAvg));
  }
  return compute_.Accumulate(Flat(scratch, shard_), Flat(local_grad + local_offset_, shard_));
}

void FlatUnit::PointValues(float* full) const {
  for (size_t i = 0; i < parameters_.size(); ++i)
    parameters_[i]->value.data = full == nullptr ? nullptr : full + offsets_[i];
}

void FlatUnit::PointGrads(float* full) const {
  for (size_t i = 0; i < parameters_.size(); ++i)
    parameters_[i]->grad.data = full == nullptr ? nullptr : full + offsets_[i];
}

}  // namespace titan::fsdp
