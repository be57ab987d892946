// One FSDP flat buffer: parameters' elements back to back, padded to a multiple of the shard
// degree, rank r keeping the r-th contiguous run. Gathering is one all-gather of the runs;
// reducing gradients is one reduce-scatter into the runs (then an all-reduce across replicas under
// HSDP). A unit (a block, or the root's own parameters) has one flat buffer per format its
// parameters are gathered in (Parameter::compute_dtype): f32, bf16 (mixed precision) or e4m3
// codes with one scale per parameter (Float8). The shards and gradients stay f32 whatever the
// format: only the gathered copy is in low precision.
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
  // `format` is the parameters' compute_dtype: what Gather hands the module.
  FlatUnit(std::vector<Parameter*> parameters, int degree, int rank, int64_t local_offset,
           DevicePlugin& device, DType format = DType::kF32);

  int64_t shard_count() const { return shard_; }  // elements each rank keeps (padding included)
  int64_t local_offset() const { return local_offset_; }
  DType format() const { return format_; }
  size_t parameter_count() const { return parameters_.size(); }

  // Copies this rank's run out of the parameters' current (whole) values into `local` and
  // `local_grad` (the plugin's buffers), points each parameter's shard there and its value and
  // grad at nothing; appends the weight-decay runs as optimizer segments.
  absl::Status Shard(float* local, float* local_grad, std::vector<ParamSegment>& segments);

  // e4m3 only. This rank's run of each parameter in `local` (empty where it holds none), and
  // where the whole parameters' amaxes are kept (f32, one per parameter, on the device).
  std::vector<TensorView> LocalRuns(const float* local) const;
  void set_amax(TensorView amax) { amax_ = std::move(amax); }
  // The amax of each whole parameter: its runs' amaxes, max-reduced over each of `groups` (the
  // shard group, and under tensor parallelism a copy of the tp group, whose ranks hold the
  // parameter's other pieces).
  absl::Status ReduceAmax(const std::vector<Communicator*>& groups, const float* local);

  // The floats a gathered buffer takes: the format's bytes (f32 with `whole_precision`).
  int64_t gathered_floats(bool whole_precision) const;
  // Starts gathering into `full`: every rank's run of `local`, in the format (e4m3 quantized by
  // the amaxes that ReduceAmax or the plugin left) or, with `whole_precision`, in f32. `written`
  // is an event of the compute stream after every write of `local` and every earlier use of
  // `full` (titan/communicator.h's rule); an f32 gather waits for it alone, a low-precision one
  // for the conversion of this rank's run, which it queues on the compute stream first. The
  // caller waits for the transfer before reading `full` and releases `written` after the call.
  absl::StatusOr<std::unique_ptr<Communicator::Transfer>> StartGather(Communicator& shard_group,
                                                                      const float* local,
                                                                      void* full,
                                                                      bool whole_precision,
                                                                      EventHandle written);
  // Adds the mean over all ranks of `full_grad` (padded size), times `scale`, to this rank's run
  // of `local_grad`; `replicas` (HSDP) also averages across the replica group. `scratch` holds
  // one run.
  absl::Status ReduceGradients(Communicator& shard_group, Communicator* replicas,
                               const float* full_grad, float* scratch, float* local_grad,
                               float scale = 1.0f) const;

  int64_t padded_count() const { return shard_ * degree_; }
  // Points the parameters at the elements of a gathered buffer (their value in f32, else their
  // compute copy and scale), or at nothing.
  void PointValues(void* full, bool whole_precision) const;
  void PointGrads(float* full) const;

 private:
  TensorView Flat(const void* data, int64_t count, DType dtype = DType::kF32) const {
    return TensorView{const_cast<void*>(data), dtype, device_, {count}, {}};
  }
  // Parameter i's run on this rank: its first element's place in the run and how many.
  int64_t RunBegin(size_t i) const;
  int64_t RunCount(size_t i) const;

  std::vector<Parameter*> parameters_;
  std::vector<int64_t> offsets_;  // each parameter's first element in the flat buffer
  int degree_, rank_;
  int64_t shard_ = 0, local_offset_ = 0;
  DevicePlugin& device_plugin_;
  Compute& compute_;
  Device device_;
  DType format_;
  // Low-precision formats: this rank's run converted before the all-gather; e4m3: each
  // parameter's inverse scale, and its amax (the plugin's).
  DeviceBuffer low_run_, inverse_scales_;
  TensorView amax_;
};

}  // namespace titan::fsdp

#endif  // TITAN_PLUGINS_PARALLEL_FSDP_FLAT_UNIT_H_
