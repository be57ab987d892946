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
                   DevicePlugin& device, DType format)
    : parameters_(std::move(parameters)),
      degree_(degree),
      rank_(rank),
      local_offset_(local_offset),
      device_plugin_(device),
      compute_(*device.compute()),
      device_(compute_.device()),
      format_(format) {
  int64_t total = 0;
  for (const Parameter* p : parameters_) {
    offsets_.push_back(total);
    total += p->value.numel();
  }
  shard_ = (total + degree - 1) / degree;
  // A low-precision run ends on a 4-byte boundary, so that the gathered runs, each a whole
  // number of floats, follow each other with no gap.
  if (format != DType::kF32) shard_ = (shard_ + 3) / 4 * 4;
}

int64_t FlatUnit::RunBegin(size_t i) const {
  return std::clamp(offsets_[i] - shard_ * rank_, int64_t{0}, shard_);
}

int64_t FlatUnit::RunCount(size_t i) const {
  const int64_t end =
      std::clamp(offsets_[i] + parameters_[i]->value.numel() - shard_ * rank_, int64_t{0}, shard_);
  return end - RunBegin(i);
}

absl::Status FlatUnit::Shard(float* local, float* local_grad, std::vector<ParamSegment>& segments) {
  const int64_t begin = shard_ * rank_;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Parameter& p = *parameters_[i];
    const int64_t run = RunBegin(i), count = RunCount(i);
    float* value = local + local_offset_ + run;
    float* grad = local_grad + local_offset_ + run;
    if (count > 0) {
      const float* source = p.value.data_as<const float>() + (begin + run - offsets_[i]);
      TITAN_RETURN_IF_ERROR(compute_.Copy(Flat(source, count), Flat(value, count)));
      segments.push_back({local_offset_ + run, count, p.weight_decay});
    }
    p.shard = Flat(value, count);
    p.shard_grad = Flat(grad, count);
    p.shard_offset = count > 0 ? begin + run - offsets_[i] : 0;
    p.placements[static_cast<int>(MeshDim::kDpShard)] = {Placement::Kind::kFlatShard, 0};
    p.value.data = nullptr;
    p.grad.data = nullptr;
  }
  if (format_ != DType::kF32) {
    TITAN_ASSIGN_OR_RETURN(
        low_run_, DeviceBuffer::Allocate(device_plugin_, gathered_floats(false) / degree_));
  }
  if (format_ == DType::kF8E4M3) {
    TITAN_ASSIGN_OR_RETURN(
        inverse_scales_,
        DeviceBuffer::Allocate(device_plugin_, static_cast<int64_t>(parameters_.size())));
  }
  return absl::OkStatus();
}

std::vector<TensorView> FlatUnit::LocalRuns(const float* local) const {
  std::vector<TensorView> runs;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    runs.push_back(Flat(local + local_offset_ + RunBegin(i), RunCount(i)));
  }
  return runs;
}

absl::Status FlatUnit::ReduceAmax(const std::vector<Communicator*>& groups, const float* local) {
  const std::vector<TensorView> runs = LocalRuns(local);
  TITAN_RETURN_IF_ERROR(compute_.AbsMax(runs, amax_));
  for (Communicator* group : groups) {
    TITAN_RETURN_IF_ERROR(group->AllReduce(amax_, ReduceOp::kMax));
  }
  return absl::OkStatus();
}

int64_t FlatUnit::gathered_floats(bool whole_precision) const {
  const int64_t bytes = static_cast<int64_t>(DTypeSize(whole_precision ? DType::kF32 : format_));
  return shard_ * bytes / 4 * degree_;
}

absl::StatusOr<std::unique_ptr<Communicator::Transfer>> FlatUnit::StartGather(
    Communicator& shard_group, const float* local, void* full, bool whole_precision,
    EventHandle written) {
  const TensorView run = Flat(local + local_offset_, shard_);
  if (whole_precision || format_ == DType::kF32) {
    return shard_group.StartAllGather(run, Flat(full, padded_count()), StreamOrder{{written}});
  }
  const TensorView low = Flat(low_run_.f32(), shard_, format_);
  if (format_ == DType::kBF16) {
    TITAN_RETURN_IF_ERROR(compute_.Cast(run, low));
  } else {
    // e4m3: each parameter's run quantized by its whole amax, so every rank's codes (and each
    // one's scale, which every rank computes) equal the whole parameter's quantization.
    auto* codes = reinterpret_cast<uint8_t*>(low_run_.f32());
    for (size_t i = 0; i < parameters_.size(); ++i) {
      const int64_t count = RunCount(i);
      TensorView x = Flat(local + local_offset_ + RunBegin(i), count);
      x.shape = {1, count};
      TensorView out = Flat(codes + RunBegin(i), count, format_);
      out.shape = {1, count};
      TensorView amax = amax_;
      amax.data = amax_.data_as<float>() + i;
      amax.shape = {1};
      TITAN_RETURN_IF_ERROR(
          compute_.Float8Quantize(x, {Float8Granularity::kTensor, false, false, amax}, out,
                                  Flat(inverse_scales_.f32() + i, 1)));
    }
  }
  // After the conversion, which follows `written` on the same stream.
  TITAN_ASSIGN_OR_RETURN(EventHandle converted, compute_.RecordEvent(compute_.current_stream()));
  absl::StatusOr<std::unique_ptr<Communicator::Transfer>> started = shard_group.StartAllGather(
      low, Flat(full, padded_count(), format_), StreamOrder{{converted}});
  // Released on this (the communication) thread: the wait is for the conversion just queued.
  absl::Status released = compute_.SynchronizeEvent(converted);
  if (started.ok() && !released.ok()) return released;
  return started;
}

absl::Status FlatUnit::ReduceGradients(Communicator& shard_group, Communicator* replicas,
                                       const float* full_grad, float* scratch, float* local_grad,
                                       float scale) const {
  TITAN_RETURN_IF_ERROR(shard_group.ReduceScatter(Flat(full_grad, padded_count()),
                                                  Flat(scratch, shard_), ReduceOp::kAvg));
  if (replicas != nullptr) {
    TITAN_RETURN_IF_ERROR(replicas->AllReduce(Flat(scratch, shard_), ReduceOp::kAvg));
  }
  if (scale != 1.0f) TITAN_RETURN_IF_ERROR(compute_.Scale(Flat(scratch, shard_), scale));
  return compute_.Accumulate(Flat(scratch, shard_), Flat(local_grad + local_offset_, shard_));
}

void FlatUnit::PointValues(void* full, bool whole_precision) const {
  const DType format = whole_precision ? DType::kF32 : format_;
  auto* bytes = static_cast<unsigned char*>(full);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Parameter& p = *parameters_[i];
    void* first = full == nullptr ? nullptr : bytes + offsets_[i] * DTypeSize(format);
    p.compute.data = p.compute_inverse_scale.data = nullptr;
    p.value.data = format == DType::kF32 ? first : nullptr;
    if (format == DType::kF32 || first == nullptr) continue;
    p.compute = TensorView{first, format, device_, p.value.shape, {}};
    if (format == DType::kF8E4M3) p.compute_inverse_scale = Flat(inverse_scales_.f32() + i, 1);
  }
}

void FlatUnit::PointGrads(float* full) const {
  for (size_t i = 0; i < parameters_.size(); ++i)
    parameters_[i]->grad.data = full == nullptr ? nullptr : full + offsets_[i];
}

}  // namespace titan::fsdp
