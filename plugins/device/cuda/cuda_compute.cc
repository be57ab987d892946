#include "cuda_compute.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cuda_status.h"
#include "cudnn_attention.h"
#include "gemm_plan.h"
#include "operands.h"

namespace titan::cuda {
namespace {

// The current device as the log names it, or why there is none.
std::string DeviceName() {
  int ordinal = 0;
  cudaDeviceProp properties{};
  if (cudaGetDevice(&ordinal) != cudaSuccess ||
      cudaGetDeviceProperties(&properties, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return "no CUDA device visible";
  }
  return absl::StrCat(properties.name, " (sm_", properties.major * 10 + properties.minor,
                      ", device ", ordinal, ")");
}

}  // namespace

absl::StatusOr<StreamScratch> StreamScratch::Allocate(size_t bytes, cudaStream_t stream,
                                                      const char* what) {
  void* data = nullptr;
  TITAN_RETURN_IF_ERROR(
      CheckAllocation(cudaMallocAsync(&data, bytes > 0 ? bytes : 1, stream), what, bytes));
  return StreamScratch(data, stream);
}

StreamScratch::StreamScratch(StreamScratch&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), stream_(other.stream_) {}

StreamScratch::~StreamScratch() {
  if (data_ != nullptr) cudaFreeAsync(data_, stream_);  // nothing to report a failure to
}

CudaCompute::CudaCompute() = default;

CudaCompute::~CudaCompute() {
  // At process exit the runtime may be gone already; its errors then are of no consequence.
  gemm_plans_.reset();
  cudnn_attention_.reset();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (lt_ != nullptr) cublas_->Destroy(lt_);
  if (blas_handle_ != nullptr) blas_->Destroy_v2(blas_handle_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  cudaGetLastError();
}

absl::Status CudaCompute::Ready() {
  // Another thread of the process (a communication thread) starts on device 0: point it at ours.
  if (ready_) return Check(cudaSetDevice(ordinal_), "cudaSetDevice");
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess || count == 0) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda: no CUDA device is visible to this process (cudaGetDeviceCount: ",
        counted == cudaSuccess ? "0 devices" : cudaGetErrorString(counted),
        "), so the cuda compute cannot run; use job.device = \"cpu\" on this machine"));
  }
  int ordinal = 0;
  TITAN_RETURN_IF_ERROR(Check(cudaGetDevice(&ordinal), "cudaGetDevice"));
  cudaDeviceProp properties{};
  TITAN_RETURN_IF_ERROR(
      Check(cudaGetDeviceProperties(&properties, ordinal), "cudaGetDeviceProperties"));
  // A blocking stream: it orders after the legacy default stream, on which the device plugin's
  // own copies and fills run.
  TITAN_RETURN_IF_ERROR(Check(cudaStreamCreate(&stream_), "cudaStreamCreate"));
  // Kernels' scratch comes from the stream-ordered pool: keep what it frees for the next call
  // rather than handing it back to the driver at every synchronization.
  cudaMemPool_t pool = nullptr;
  TITAN_RETURN_IF_ERROR(
      Check(cudaDeviceGetDefaultMemPool(&pool, ordinal), "cudaDeviceGetDefaultMemPool"));
  uint64_t keep_all = UINT64_MAX;
  TITAN_RETURN_IF_ERROR(
      Check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all),
            "cudaMemPoolSetAttribute"));
  TITAN_ASSIGN_OR_RETURN(cublas_, LoadCublasLt());
  TITAN_RETURN_IF_ERROR(CheckCublas(cublas_->Create(&lt_), "cublasLtCreate"));
  gemm_plans_ = std::make_unique<GemmPlans>();
  cudnn_attention_ = std::make_unique<CudnnAttention>();
  TITAN_RETURN_IF_ERROR(CheckAllocation(cudaMalloc(&workspace_, kWorkspaceBytes),
                                        "the cuBLASLt workspace", kWorkspaceBytes));
  ordinal_ = ordinal;
  capability_ = properties.major * 10 + properties.minor;
  name_ = DeviceName();
  ready_ = true;
  return absl::OkStatus();
}

std::string CudaCompute::Describe() const {
  return absl::StrCat(
      "cuda: ", ready_ ? name_ : DeviceName(), "; f32 GEMM by cuBLASLt with TF32 ",
      allow_tf32_ ? "allowed" : "off",
      "; bf16 GEMM by cuBLASLt with f32 accumulation; grouped GEMMs by cuBLAS",
      grouped_bf16_ ? "" : " (bf16 ones group by group through cuBLASLt)", "; attention ",
      attention_mode_ == AttentionMode::kTiled
          ? "by titan's tiled flash-attention kernels (f32; job.attention = \"tiled\")"
          : absl::StrCat("by cuDNN's fused flash attention in bf16 where it applies",
                         attention_mode_ == AttentionMode::kAuto ? " in a bf16 run" : "",
                         " (sm_80+, causal self-attention, head_dim a multiple of 8 up to ",
                         kCudnnMaxHeadDim, ", the backward's seq_len a multiple of ",
                         kCudnnBackwardSeqMultiple, "; job.attention = \"",
                         AttentionModeName(attention_mode_),
                         "\"), else by titan's tiled flash-attention kernels (f32)"),
      "; Float8 GEMM by cuBLASLt FP8 where the GPU has it "
      "(sm_89+), else titan's kernel");
}

absl::Status CudaCompute::RunCopy(const TensorView& src, TensorView dst) {
  TITAN_RETURN_IF_ERROR(Ready());
  const size_t bytes = src.nbytes();
  if (src.data == dst.data || bytes == 0) return absl::OkStatus();
  const auto* from = static_cast<const char*>(src.data);
  auto* to = static_cast<char*>(dst.data);
  if (from < to + bytes && to < from + bytes) {  // overlapping: the CPU's memmove, via scratch
    TITAN_ASSIGN_OR_RETURN(StreamScratch staging, Scratch(bytes, "Copy staging"));
    TITAN_RETURN_IF_ERROR(
        Check(cudaMemcpyAsync(staging.as<void>(), from, bytes, cudaMemcpyDeviceToDevice, stream_),
              "cudaMemcpyAsync (Copy)"));
    return Check(
        cudaMemcpyAsync(to, staging.as<const char>(), bytes, cudaMemcpyDeviceToDevice, stream_),
        "cudaMemcpyAsync (Copy)");
  }
  return Check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_),
               "cudaMemcpyAsync (Copy)");
}

// The host copies wait for the stream: the host buffer is the caller's again on return.
absl::Status CudaCompute::RunCopyToHost(const TensorView& src, void* host_dst) {
  TITAN_RETURN_IF_ERROR(Ready());
  if (src.nbytes() == 0) return absl::OkStatus();
  TITAN_RETURN_IF_ERROR(
      Check(cudaMemcpyAsync(host_dst, src.data, src.nbytes(), cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync (CopyToHost)"));
  return Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (CopyToHost)");
}

absl::Status CudaCompute::RunCopyFromHost(const void* host_src, TensorView dst) {
  TITAN_RETURN_IF_ERROR(Ready());
  if (dst.nbytes() == 0) return absl::OkStatus();
  TITAN_RETURN_IF_ERROR(
      Check(cudaMemcpyAsync(dst.data, host_src, dst.nbytes(), cudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync (CopyFromHost)"));
  return Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (CopyFromHost)");
}

absl::StatusOr<EventHandle> CudaCompute::RecordEvent(StreamHandle stream) {
  TITAN_RETURN_IF_ERROR(Ready());
  cudaEvent_t event = nullptr;
  TITAN_RETURN_IF_ERROR(
      Check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags"));
  absl::Status recorded =
      Check(cudaEventRecord(event, static_cast<cudaStream_t>(stream)), "cudaEventRecord");
  if (!recorded.ok()) {
    cudaEventDestroy(event);
    return recorded;
  }
  return EventHandle{event};
}

absl::Status CudaCompute::StreamWaitEvent(StreamHandle stream, EventHandle event) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event), 0),
      "cudaStreamWaitEvent");
}

absl::Status CudaCompute::SynchronizeEvent(EventHandle event) {
  TITAN_RETURN_IF_ERROR(Ready());
  auto* cuda_event = static_cast<cudaEvent_t>(event);
  absl::Status done = Check(cudaEventSynchronize(cuda_event), "cudaEventSynchronize");
  TITAN_RETURN_IF_ERROR(Check(cudaEventDestroy(cuda_event), "cudaEventDestroy"));
  return done;
}

absl::Status CudaCompute::Synchronize() {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

}  // namespace titan::cuda
