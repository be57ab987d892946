#include "plugins/comm/mpi/device_staging.h"

#include "absl/strings/str_cat.h"

namespace titan::mpi {

std::shared_ptr<StagingPool> StagingPool::Create(DevicePlugin& device) {
  return std::shared_ptr<StagingPool>(new StagingPool(device));
}

absl::StatusOr<std::shared_ptr<StagingPool::Block>> StagingPool::Acquire(size_t bytes) {
  Block* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.lower_bound(bytes);
    if (it != free_.end()) {
      block = it->second;
      free_.erase(it);
    }
  }
  if (block == nullptr) {
    TITAN_ASSIGN_OR_RETURN(void* data, device_.AllocateHost(bytes > 0 ? bytes : 1));
    block = new Block{data, bytes, false};
  }
  std::shared_ptr<StagingPool> self = shared_from_this();
  return std::shared_ptr<Block>(block, [self](Block* b) { self->Release(b); });
}

void StagingPool::Release(Block* block) {
  if (block->lost) return;  // MPI may write it yet: neither reused nor freed
  std::lock_guard<std::mutex> lock(mutex_);
  free_.emplace(block->bytes, block);
}

bool OnDevice(const TensorView& view) { return view.device.type != DeviceType::kCpu; }

absl::StatusOr<StagedBuffer> StageIn(StagingPool& pool, absl::string_view op,
                                     const TensorView& view, bool copy_in) {
  DevicePlugin& device = pool.device();
  Compute* compute = device.compute();
  if (view.device.type != device.type() || compute == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": a buffer is on device type ", static_cast<int>(view.device.type),
                     ", but this rank computes on device type ", static_cast<int>(device.type()),
                     compute == nullptr ? " (which has no compute to copy with)" : ""));
  }
  if (!view.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": device buffers must be contiguous"));
  }
  StagedBuffer staged;
  TITAN_ASSIGN_OR_RETURN(staged.block, pool.Acquire(view.nbytes()));
  staged.host = TensorView{staged.block->data, view.dtype, Device{}, view.shape, {}};
  if (copy_in) {
    TITAN_RETURN_IF_ERROR(compute->Synchronize());
    absl::Status copied = compute->CopyToHost(view, staged.host.data);
    if (!copied.ok()) {
      return absl::Status(copied.code(),
                          absl::StrCat(op, ": staging a device buffer: ", copied.message()));
    }
  }
  return staged;
}

absl::Status StageOut(StagingPool& pool, const StagedBuffer& staged, TensorView view) {
  Compute& compute = *pool.device().compute();
  absl::Status copied = compute.CopyFromHost(staged.host.data, view);
  if (!copied.ok()) {
    return absl::Status(copied.code(),
                        absl::StrCat("copying a staged result to the device: ", copied.message()));
  }
  return compute.Synchronize();
}

}  // namespace titan::mpi
