// The CUDA device's compute: titan/compute.h on the selected GPU. GEMMs run through cuBLASLt,
// everything else through this plugin's own kernels (the *_kernels.cu files, which see only raw
// pointers); this side checks the operands as the CPU does and launches on the compute stream.
// Nothing touches the GPU until the first call, which creates the stream and the cuBLASLt
// handle on the device selected then; without a device that call returns a Status saying so.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_CUDA_COMPUTE_H_
#define TITAN_PLUGINS_DEVICE_CUDA_CUDA_COMPUTE_H_

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cublaslt_library.h"
#include "titan/compute.h"

namespace titan::cuda {

// Device memory for one call's intermediates, allocated and freed in stream order.
class StreamScratch {
 public:
  static absl::StatusOr<StreamScratch> Allocate(size_t bytes, cudaStream_t stream,
                                                const char* what);
  StreamScratch(StreamScratch&& other) noexcept;
  StreamScratch& operator=(StreamScratch&&) = delete;
  StreamScratch(const StreamScratch&) = delete;
  ~StreamScratch();
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  StreamScratch(void* data, cudaStream_t stream) : data_(data), stream_(stream) {}
  void* data_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// One cuBLASLt matmul in its own column-major terms: D = alpha op(A) op(B) + beta C, with C and
// D the same matrix. A scale pointer (f32 on the device) applies to an FP8 operand: one value,
// or with outer_vector_scales one per row of op(A) / column of op(B).
struct LtOperand {
  const void* data;
  cudaDataType_t type;
  int64_t rows, columns, leading;  // as stored, column-major
  bool transpose;
  const float* scale = nullptr;
};
struct LtMatmul {
  LtOperand a, b;
  void* c;
  int64_t c_rows, c_columns;  // f32, column-major, leading dimension c_rows
  cublasComputeType_t compute;
  float alpha, beta;
  bool outer_vector_scales = false;
};

struct GemmPlans;  // gemm_plan.h

class CudaCompute : public Compute {
 public:
  CudaCompute();  // out of line: gemm_plans_ is of a type complete in cuda_compute.cc
  ~CudaCompute() override;
  CudaCompute(const CudaCompute&) = delete;
  CudaCompute& operator=(const CudaCompute&) = delete;

  // The recipe's `tf32` key: f32 GEMMs may use TF32 tensor cores.
  void set_allow_tf32(bool allow) { allow_tf32_ = allow; }

  Device device() const override { return Device{DeviceType::kCuda, 0}; }
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

  // The compute stream once the first call has created it (null before: CUDA's default stream).
  StreamHandle current_stream() const override { return stream_; }
  absl::StatusOr<EventHandle> RecordEvent(StreamHandle stream) override;
  absl::Status StreamWaitEvent(StreamHandle stream, EventHandle event) override;
  absl::Status SynchronizeEvent(EventHandle event) override;
  absl::Status Synchronize() override;

 private:
  // Creates the stream, the cuBLASLt handle and its workspace on first use.
  absl::Status Ready();
  absl::StatusOr<StreamScratch> Scratch(size_t bytes, const char* what) {
    return StreamScratch::Allocate(bytes, stream_, what);
  }
  // Runs `call` through cuBLASLt (the heuristic's first algorithm); `kernel` names the caller.
  absl::Status RunLtMatmul(const char* kernel, const LtMatmul& call);
  bool HasFloat8TensorCores() const { return capability_ >= 89; }

  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's, as PyTorch's on Hopper

  bool allow_tf32_ = false;
  bool ready_ = false;
  cudaStream_t stream_ = nullptr;
  const CublasLt* cublas_ = nullptr;  // loaded by Ready()
  cublasLtHandle_t lt_ = nullptr;
  std::unique_ptr<GemmPlans> gemm_plans_;  // cuBLASLt plans by problem, kept across calls
  void* workspace_ = nullptr;
  int ordinal_ = 0;     // the device the first call found selected
  int capability_ = 0;  // major * 10 + minor
  std::string name_;
};

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_CUDA_COMPUTE_H_
