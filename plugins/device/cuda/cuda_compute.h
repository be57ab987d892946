// The CUDA device's compute: titan/compute.h on the selected GPU. GEMMs run through cuBLASLt
// (grouped ones through cuBLAS), everything else through this plugin's own kernels (the
// *_kernels.cu files, which see only raw pointers); this side launches them on the compute
// stream, with operands that the kernel table's checks (titan/compute_kernels.inc), run by
// titan::Compute, have passed.
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

#include "attention_route.h"
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
  int64_t c_rows, c_columns;  // column-major, leading dimension c_rows
  cublasComputeType_t compute;
  float alpha, beta;
  bool outer_vector_scales = false;
  cudaDataType_t c_type = CUDA_R_32F;  // or CUDA_R_16BF with bf16 a and b
};

struct GemmPlans;       // gemm_plan.h
struct CudnnAttention;  // cudnn_attention.h
struct SdpaPlan;        // cudnn_sdpa.h
enum class SdpaDirection;

class CudaCompute : public Compute {
 public:
  CudaCompute();  // out of line: gemm_plans_ is of a type complete in cuda_compute.cc
  ~CudaCompute() override;
  CudaCompute(const CudaCompute&) = delete;
  CudaCompute& operator=(const CudaCompute&) = delete;

  // The recipe's `tf32` key: f32 GEMMs may use TF32 tensor cores.
  void set_allow_tf32(bool allow) { allow_tf32_ = allow; }
  // The recipe's `attention` key (attention_route.h).
  void set_attention_mode(AttentionMode mode) { attention_mode_ = mode; }

  Device device() const override { return Device{DeviceType::kCuda, 0}; }
  std::string Describe() const override;

  // The compute stream once the first call has created it (null before: CUDA's default stream).
  StreamHandle current_stream() const override { return stream_; }
  absl::StatusOr<EventHandle> RecordEvent(StreamHandle stream) override;
  absl::Status StreamWaitEvent(StreamHandle stream, EventHandle event) override;
  absl::Status SynchronizeEvent(EventHandle event) override;
  absl::Status Synchronize() override;

 private:
#include "titan/compute_overrides.inc"

  // Creates the stream, the cuBLASLt handle and its workspace on first use.
  absl::Status Ready();
  absl::StatusOr<StreamScratch> Scratch(size_t bytes, const char* what) {
    return StreamScratch::Allocate(bytes, stream_, what);
  }
  // Ready(), then loads cuBLAS and creates its handle on the compute stream (grouped GEMMs only).
  absl::Status BlasReady();
  // Runs `call` through cuBLASLt (the heuristic's first algorithm); `kernel` names the caller.
  absl::Status RunLtMatmul(const char* kernel, const LtMatmul& call);
  bool HasFloat8TensorCores() const { return capability_ >= 89; }
  // Run the call through cuDNN when ChooseAttention picks it and cuDNN builds a plan for the
  // shape; false (nothing run) where the tiled kernels are to run instead. Ready() has run.
  absl::StatusOr<bool> TryCudnnAttentionForward(const AttentionSpec& spec, const TensorView& q,
                                                const TensorView& k, const TensorView& v,
                                                TensorView out, TensorView lse);
  absl::StatusOr<bool> TryCudnnAttentionBackward(const AttentionSpec& spec, const TensorView& dout,
                                                 const TensorView& q, const TensorView& k,
                                                 const TensorView& v, const TensorView& out,
                                                 const TensorView& lse, TensorView dq,
                                                 TensorView dk, TensorView dv);
  // The cached plan of the call, or null where the tiled kernels run (said once on stderr).
  absl::StatusOr<const SdpaPlan*> CudnnAttentionPlan(SdpaDirection direction,
                                                     const AttentionSpec& spec);
  // The route of a call, loading cuDNN and creating its handle the first time it is picked.
  AttentionRoute RouteAttention(const AttentionSpec& spec, bool backward);
  absl::Status CastToBf16(const TensorView& from, void* to, int64_t count, const char* what);
  // Writes `line` to stderr the first time it is asked to for `key`.
  void LogAttentionOnce(const std::string& key, const std::string& line);

  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's, as PyTorch's on Hopper

  bool allow_tf32_ = false;
  AttentionMode attention_mode_ = AttentionMode::kAuto;
  bool ready_ = false;
  cudaStream_t stream_ = nullptr;
  const CublasLt* cublas_ = nullptr;  // loaded by Ready()
  cublasLtHandle_t lt_ = nullptr;
  const Cublas* blas_ = nullptr;  // loaded by BlasReady()
  cublasHandle_t blas_handle_ = nullptr;
  bool grouped_bf16_ = true;               // until cuBLAS refuses bf16 operands into f32 c
  std::unique_ptr<GemmPlans> gemm_plans_;  // cuBLASLt plans by problem, kept across calls
  std::unique_ptr<CudnnAttention> cudnn_attention_;  // made by Ready(); cuDNN loaded on first use
  void* workspace_ = nullptr;
  int ordinal_ = 0;     // the device the first call found selected
  int capability_ = 0;  // major * 10 + minor
  std::string name_;
};

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_CUDA_COMPUTE_H_
