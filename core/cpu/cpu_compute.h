// The CPU device's compute: the reference implementation of titan/compute.h, on the kernels in
// core/tensor (BLAS for GEMMs, OpenMP for the rest). Every other backend is tested against it.
#ifndef TITAN_CORE_CPU_CPU_COMPUTE_H_
#define TITAN_CORE_CPU_CPU_COMPUTE_H_

#include <atomic>
#include <string>

#include "titan/compute.h"

namespace titan {

class CpuCompute : public Compute {
 public:
  // The process's one CPU compute.
  static CpuCompute& Get();

  Device device() const override { return Device{DeviceType::kCpu, 0}; }
  std::string Describe() const override;

  // Which attention kernels run: f32 (core/tensor/attention.h, the default) or bf16 GEMMs with
  // f32 softmax and sums (core/tensor/attention_bf16.h). A model whose matmuls are bf16
  // (training.mixed_precision_param = "bfloat16") sets bf16 when it is made on the CPU, and f32
  // otherwise, so each run's attention follows its own precision.
  void SetAttentionDType(DType dtype) { bf16_attention_ = dtype == DType::kBF16; }
  DType attention_dtype() const { return bf16_attention_ ? DType::kBF16 : DType::kF32; }

  StreamHandle current_stream() const override { return nullptr; }
  absl::StatusOr<EventHandle> RecordEvent(StreamHandle stream) override;
  absl::Status StreamWaitEvent(StreamHandle stream, EventHandle event) override;
  absl::Status SynchronizeEvent(EventHandle event) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
#include "titan/compute_overrides.inc"

  std::atomic<bool> bf16_attention_{false};
};

}  // namespace titan

#endif  // TITAN_CORE_CPU_CPU_COMPUTE_H_
