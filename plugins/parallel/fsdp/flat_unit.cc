#include "plugins/parallel/fsdp/flat_unit.h"

#include <algorithm>
#include <cstring>

namespace titan::fsdp {

std::unique_ptr<float[]> BufferPool::Take(int64_t count, bool zeroed) {
  std::unique_ptr<float[]> buffer;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find_if(free_.begin(), free_.end(),
                           [count](const auto& entry) { return entry.first == count; });
    if (it != free_.end()) {
      buffer = std::move(it->second);
      free_.erase(it);
    }
  }
  if (buffer == nullptr) return std::make_unique<float[]>(static_cast<size_t>(count));
  if (zeroed) std::memset(buffer.get(), 0, static_cast<size_t>(count) * sizeof(float));
  return buffer;
}

void BufferPool::Give(std::unique_ptr<float[]> buffer, int64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.emplace_back(count, std::move(buffer));
}

FlatUnit::FlatUnit(std::vector<Parameter*> parameters, int degree, int rank, int64_t local_offset)
    : parameters_(std::move(parameters)),
      degree_(degree),
      rank_(rank),
      local_offset_(local_offset) {
  int64_t total = 0;
  for (const Parameter* p : parameters_) {
    offsets_.push_back(total);
    total += p->value.numel();
  }
  shard_ = (total + degree - 1) / degree;
}

void FlatUnit::Shard(float* local, float* local_grad, std::vector<ParamSegment>& segments) {
  const int64_t begin = shard_ * rank_, end = begin + shard_;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Parameter& p = *parameters_[i];
    const int64_t first = std::max(begin, offsets_[i]);
    const int64_t last = std::min(end, offsets_[i] + p.value.numel());
    const int64_t count = std::max<int64_t>(0, last - first);
    float* value = local + local_offset_ + (first - begin);
    float* grad = local_grad + local_offset_ + (first - begin);
    if (count > 0) {
      std::memcpy(value, p.value.data_as<const float>() + (first - offsets_[i]),
                  static_cast<size_t>(count) * sizeof(float));
      segments.push_back({local_offset_ + (first - begin), count, p.weight_decay});
    }
    p.shard = FlatF32(value, count);
    p.shard_grad = FlatF32(grad, count);
    p.shard_offset = count > 0 ? first - offsets_[i] : 0;
    p.placements[static_cast<int>(MeshDim::kDpShard)] = {Placement::Kind::kFlatShard, 0};
    p.value.data = nullptr;
    p.grad.data = nullptr;
  }
}

absl::Status FlatUnit::Gather(Communicator& shard_group, const float* local, float* full) const {
  return shard_group.AllGather(FlatF32(const_cast<float*>(local) + local_offset_, shard_),
                               FlatF32(full, padded_count()));
}

absl::Status FlatUnit::ReduceGradients(Communicator& shard_group, Communicator* replicas,
                                       const float* full_grad, float* scratch,
                                       float* local_grad) const {
  TITAN_RETURN_IF_ERROR(
      shard_group.ReduceScatter(FlatF32(const_cast<float*>(full_grad), padded_count()),
                                FlatF32(scratch, shard_), ReduceOp::kAvg));
  if (replicas != nullptr) {
    TITAN_RETURN_IF_ERROR(replicas->AllReduce(FlatF32(scratch, shard_), ReduceOp::kAvg));
  }
  float* out = local_grad + local_offset_;
  for (int64_t i = 0; i < shard_; ++i) out[i] += scratch[i];
  return absl::OkStatus();
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
