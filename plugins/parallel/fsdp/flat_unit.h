// One FSDP unit (a block, or the root's own parameters) as a flat buffer: its parameters'
// elements back to back, padded to a multiple of the shard degree, rank r keeping the r-th
// contiguous run. Gathering is one all-gather of the runs; reducing gradients is one
// reduce-scatter into the runs (then an all-reduce across replicas under HSDP).
#ifndef TITAN_PLUGINS_PARALLEL_FSDP_FLAT_UNIT_H_
#define TITAN_PLUGINS_PARALLEL_FSDP_FLAT_UNIT_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "titan/communicator.h"
#include "titan/device.h"
#include "titan/module.h"
#include "titan/optimizer.h"

namespace titan::fsdp {

// Reuses freed gathered buffers of the same size: every step gathers each unit again, and
// fresh allocations of that size would fault in their pages each time. Thread-safe. Buffers live
// on the device.
class BufferPool {
 public:
  explicit BufferPool(DevicePlugin* device = nullptr) : device_(device) {}
  void set_device(DevicePlugin& device) { device_ = &device; }
  // A buffer of `count` floats; zeroed when asked (gradients), as left otherwise (gathers
  // overwrite every element).
  absl::StatusOr<DeviceBuffer> Take(int64_t count, bool zeroed);
  void Give(DeviceBuffer buffer);

 private:
  DevicePlugin* device_;
  std::mutex mutex_;
  std::vector<DeviceBuffer> free_;
};

class FlatUnit {
 public:
  // Lays out `parameters` for `degree` ranks; this rank (`rank`) keeps its run at
  // `local_offset` in the plugin's local buffers, on `device` (which must have a compute).
  FlatUnit(std::vector<Parameter*> parameters, int degree, int rank, int64_t local_offset,
           DevicePlugin& device);

  int64_t shard_count() const { return shard_; }  // elements each rank keeps (padding included)
  int64_t local_offset() const { return local_offset_; }

  // Copies this rank's run out of the parameters' current (whole) values into `local` and
  // `local_grad` (the plugin's buffers), points each parameter's shard there and its value and
  // grad at nothing; appends the weight-decay runs as optimizer segments.
  absl::Status Shard(float* local, float* local_grad, std::vector<ParamSegment>& segments);

  // Into `full` (padded size): every rank's run of `local`.
  absl::Status Gather(Communicator& shard_group, const float* local, float* full) const;
  // Adds the mean over all ranks of `full_grad` (padded size) to this rank's run of
  // `local_grad`; `replicas` (HSDP) also averages across the replica group. `scratch` holds
  // one run.
  absl::Status ReduceGradients(Communicator& shard_group, Communicator* replicas,
                               const float* full_grad, float* scratch, float* local_grad) const;

  int64_t padded_count() const { return shard_ * degree_; }
  // Points the parameters' value (or grad) at the elements of a gathered buffer, or at nothing.
  void PointValues(float* full) const;
  void PointGrads(float* full) const;

 private:
  TensorView Flat(const float* data, int64_t count) const {
    return FlatF32(const_cast<float*>(data), count, device_);
  }

  std::vector<Parameter*> parameters_;
  std::vector<int64_t> offsets_;  // each parameter's first element in the flat buffer
  int degree_, rank_;
  int64_t shard_ = 0, local_offset_ = 0;
  Compute& compute_;
  Device device_;
};

}  // namespace titan::fsdp

#endif  // TITAN_PLUGINS_PARALLEL_FSDP_FLAT_UNIT_H_
