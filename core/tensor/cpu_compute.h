// The CPU device's compute: the reference implementation of titan/compute.h, on the kernels in
// core/tensor (BLAS for GEMMs, OpenMP for the rest). Every other backend is tested against it.
#ifndef TITAN_CORE_TENSOR_CPU_COMPUTE_H_
#define TITAN_CORE_TENSOR_CPU_COMPUTE_H_

#include <string>

#include "titan/compute.h"

namespace titan {

class CpuCompute : public Compute {
 public:
  // The process's one CPU compute.
  static CpuCompute& Get();

  Device device() const override { return Device{DeviceType::kCpu, 0}; }
  std::string Describe() const override;

  absl::Status Gemm(const TensorView& a, bool transpose_a, const TensorView& b, bool transpose_b,
                    float alpha, float beta, TensorView c) override;

  absl::Status Float8Gemm(const TensorView& a, const TensorView& inverse_scale_a,
                          const TensorView& b, const TensorView& inverse_scale_b, float alpha,
                          float beta, TensorView c) override;
  absl::Status Float8Quantize(const TensorView& x, const Float8Scaling& scaling, TensorView out,
                              TensorView inverse_scales) override;
  absl::Status Float8Amax(const TensorView& x, const Float8Scaling& scaling,
                          TensorView amax) override;

  absl::Status AttentionForward(const AttentionSpec& spec, const TensorView& q, const TensorView& k,
                                const TensorView& v, TensorView out, TensorView lse) override;
  absl::Status AttentionBackward(const AttentionSpec& spec, const TensorView& dout,
                                 const TensorView& q, const TensorView& k, const TensorView& v,
                                 const TensorView& out, const TensorView& lse, TensorView dq,
                                 TensorView dk, TensorView dv) override;
  absl::Status AttentionMerge(const AttentionSpec& spec, const TensorView& part_out,
                              const TensorView& part_lse, TensorView out, TensorView lse) override;
  absl::Status RmsNormForward(const TensorView& inp, const TensorView& weight, double eps,
                              TensorView out, TensorView rstd) override;
  absl::Status RmsNormBackward(const TensorView& dout, const TensorView& inp,
                               const TensorView& weight, const TensorView& rstd, TensorView dinp,
                               TensorView dweight) override;
  absl::Status RopeTable(const RopeSpec& spec, int64_t position_offset, TensorView cos,
                         TensorView sin) override;
  absl::Status RopeForward(const TensorView& cos, const TensorView& sin, TensorView x) override;
  absl::Status RopeBackward(const TensorView& cos, const TensorView& sin, TensorView dx) override;
  absl::Status SwiGluForward(const TensorView& a, const TensorView& b, TensorView out) override;
  absl::Status SwiGluBackward(const TensorView& dout, const TensorView& a, const TensorView& b,
                              TensorView da, TensorView db) override;
  absl::Status EmbeddingForward(const TensorView& tokens, const TensorView& table,
                                int64_t first_row, TensorView out) override;
  absl::Status EmbeddingBackward(const TensorView& tokens, const TensorView& dout,
                                 int64_t first_row, TensorView dtable) override;

  absl::Status CrossEntropyRowMax(const TensorView& logits, TensorView max) override;
  absl::Status CrossEntropySumExp(const TensorView& logits, const TensorView& max,
                                  TensorView sum) override;
  absl::Status CrossEntropyTargetLogit(const TensorView& logits, const TensorView& targets,
                                       int64_t first_column, TensorView target) override;
  absl::Status CrossEntropyFinish(const TensorView& max, const TensorView& target,
                                  const TensorView& targets, TensorView sum_to_lse,
                                  TensorView loss) override;
  absl::Status CrossEntropyBackward(const TensorView& logits, const TensorView& lse,
                                    const TensorView& targets, int64_t first_column, float dloss,
                                    TensorView dlogits) override;

  absl::Status AdamStep(const AdamUpdate& update, TensorView params, const TensorView& grads,
                        TensorView exp_avg, TensorView exp_avg_sq) override;
  absl::Status SgdStep(const SgdUpdate& update, TensorView params, const TensorView& grads,
                       TensorView momentum_buffer) override;

  absl::Status SumOfSquares(std::span<const TensorView> tensors, std::span<const double> weights,
                            TensorView out) override;
  absl::Status AbsMax(std::span<const TensorView> tensors, TensorView out) override;
  absl::Status Cast(const TensorView& src, TensorView dst) override;
  absl::Status Fill(TensorView x, float value) override;
  absl::Status Scale(TensorView x, float scale) override;
  absl::Status Accumulate(const TensorView& x, TensorView out) override;
  absl::Status Copy(const TensorView& src, TensorView dst) override;
  absl::Status Transpose(const TensorView& src, TensorView dst) override;
  absl::Status CopyToHost(const TensorView& src, void* host_dst) override;
  absl::Status CopyFromHost(const void* host_src, TensorView dst) override;

  StreamHandle current_stream() const override { return nullptr; }
  absl::StatusOr<EventHandle> RecordEvent(StreamHandle stream) override;
  absl::Status StreamWaitEvent(StreamHandle stream, EventHandle event) override;
  absl::Status SynchronizeEvent(EventHandle event) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }
};

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_CPU_COMPUTE_H_
