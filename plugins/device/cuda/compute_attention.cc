// Attention of the CUDA compute: the kernels' own head_dim limit, on top of the kernel table's
// operand checks (which have run), then cuDNN's fused flash attention where attention_route.h
// picks it (the forward), else titan's tiled kernels (attention_kernels.cu).
#include <cstdio>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "attention_kernels.h"
#include "cuda_compute.h"
#include "cuda_status.h"
#include "cudnn_attention.h"
#include "elementwise_kernels.h"
#include "operands.h"

namespace titan::cuda {
namespace {

AttentionDims DimsOf(const AttentionSpec& s) {
  return {s.batch, s.seq_len, s.kv_len, s.heads, s.kv_heads, s.head_dim, s.q_offset - s.kv_offset};
}

absl::Status CheckHeadDim(const char* kernel, const AttentionSpec& s) {
  if (s.head_dim > kMaxAttentionHeadDim) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": head_dim ", s.head_dim,
                                                   " exceeds the cuda kernel's limit of ",
                                                   kMaxAttentionHeadDim));
  }
  return absl::OkStatus();
}

std::string ShapeText(const AttentionSpec& s) {
  return absl::StrCat("batch ", s.batch, ", seq_len ", s.seq_len, ", kv_len ", s.kv_len, ", heads ",
                      s.heads, ", kv_heads ", s.kv_heads, ", head_dim ", s.head_dim, ", q_offset ",
                      s.q_offset, ", kv_offset ", s.kv_offset);
}

const char* DirectionName(SdpaDirection direction) {
  return direction == SdpaDirection::kForward ? "forward" : "backward";
}

// Carves one scratch allocation into the cuDNN call's buffers, each 256-byte aligned.
class ScratchLayout {
 public:
  size_t Add(size_t bytes) {
    const size_t at = bytes_;
    bytes_ += (bytes + 255) / 256 * 256;
    return at;
  }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_ = 0;
};

}  // namespace

void CudaCompute::LogAttentionOnce(const std::string& key, const std::string& line) {
  if (cudnn_attention_->logged.insert(key).second) std::fprintf(stderr, "%s\n", line.c_str());
}

AttentionRoute CudaCompute::RouteAttention(const AttentionSpec& spec, bool backward) {
  AttentionCase c{.mode = attention_mode_,
                  .bf16_run = spec.matmul_dtype == DType::kBF16,
                  .capability = capability_,
                  .cudnn_loaded = true,
                  .backward = backward,
                  .seq_len = spec.seq_len,
                  .kv_len = spec.kv_len,
                  .head_dim = spec.head_dim,
                  .q_offset = spec.q_offset,
                  .kv_offset = spec.kv_offset};
  AttentionRoute route = ChooseAttention(c);
  if (!route.cudnn || cudnn_attention_->handle != nullptr) return route;
  // The first call cuDNN would take: load it and make its handle on the compute stream.
  CudnnAttention& state = *cudnn_attention_;
  absl::StatusOr<const Cudnn*> cudnn = LoadCudnn();
  absl::Status ready = cudnn.status();
  if (ready.ok()) {
    state.cudnn = *cudnn;
    const cudnnStatus_t created = state.cudnn->Create(&state.handle);
    if (created == CUDNN_STATUS_SUCCESS) {
      const cudnnStatus_t set = state.cudnn->SetStream(state.handle, stream_);
      if (set != CUDNN_STATUS_SUCCESS) {
        ready = absl::FailedPreconditionError(
            absl::StrCat("cudnnSetStream: ", CudnnStatusText(*state.cudnn, set)));
        state.cudnn->Destroy(state.handle);
        state.handle = nullptr;
      }
    } else {
      state.handle = nullptr;
      ready = absl::FailedPreconditionError(
          absl::StrCat("cudnnCreate: ", CudnnStatusText(*state.cudnn, created)));
    }
  }
  if (ready.ok()) return route;
  // cuDNN stays unloaded for the run: every later call takes the tiled kernels.
  attention_mode_ = AttentionMode::kTiled;
  c.cudnn_loaded = false;
  route = ChooseAttention(c);
  absl::StrAppend(&route.reason, " (", ready.message(), ")");
  LogAttentionOnce(
      route.reason,
      absl::StrCat("cuda: attention by titan's tiled f32 kernels from now on: ", route.reason));
  return route;
}

absl::StatusOr<const SdpaPlan*> CudaCompute::CudnnAttentionPlan(SdpaDirection direction,
                                                                const AttentionSpec& spec) {
  const char* name = DirectionName(direction);
  const AttentionRoute route = RouteAttention(spec, direction == SdpaDirection::kBackward);
  if (!route.cudnn) {
    LogAttentionOnce(absl::StrCat(name, route.reason),
                     absl::StrCat("cuda: attention ", name, " by titan's tiled f32 kernels: ",
                                  route.reason, " (first for ", ShapeText(spec), ")"));
    return nullptr;
  }
  CudnnAttention& state = *cudnn_attention_;
  const Cudnn& cudnn = *state.cudnn;
  const SdpaShape shape{spec.batch, spec.seq_len, spec.heads, spec.kv_heads, spec.head_dim};
  CudnnAttention::Plans& plans =
      direction == SdpaDirection::kForward ? *state.forward_plans : *state.backward_plans;
  std::lock_guard<std::mutex> held(plans.lock());
  absl::StatusOr<SdpaPlan*> plan = plans.FindOrBuild(shape, [&] {
    absl::StatusOr<SdpaPlan> built = BuildSdpaPlan(cudnn, state.handle, direction, shape);
    const std::string key = absl::StrCat(name, ShapeText(spec));
    if (built.ok()) {
      LogAttentionOnce(
          key, absl::StrCat(
                   "cuda: attention ", name, " by cuDNN ", CudnnVersionText(cudnn.version),
                   "'s fused flash attention in bf16 (operands cast from f32, results "
                   "cast back, f32 log-sum-exps; job.attention = \"",
                   AttentionModeName(attention_mode_), "\"",
                   attention_mode_ == AttentionMode::kAuto ? ": the run's matmuls are bf16" : "",
                   ") for ", ShapeText(spec), ": engine configuration ", built->engine, ", ",
                   built->workspace_bytes, " bytes of workspace"));
      return built;
    }
    // Any refusal at build time is remembered as one (Unimplemented), so the shape falls back
    // once and for all, and says so once.
    LogAttentionOnce(key, absl::StrCat("cuda: attention ", name,
                                       " by titan's tiled f32 kernels for ", ShapeText(spec),
                                       ": cuDNN refused the shape: ", built.status().message()));
    return absl::StatusOr<SdpaPlan>(absl::UnimplementedError(built.status().message()));
  });
  if (!plan.ok()) return nullptr;
  return *plan;  // plans are dropped only past 64 shapes, never during the call that uses one
}

absl::Status CudaCompute::CastToBf16(const TensorView& from, void* to, int64_t count,
                                     const char* what) {
  return Check(LaunchCast(from.data, FloatFormat::kF32, to, FloatFormat::kBF16, count, stream_),
               what);
}

absl::StatusOr<bool> CudaCompute::TryCudnnAttentionForward(const AttentionSpec& spec,
                                                           const TensorView& q, const TensorView& k,
                                                           const TensorView& v, TensorView out,
                                                           TensorView lse) {
  TITAN_ASSIGN_OR_RETURN(const SdpaPlan* plan, CudnnAttentionPlan(SdpaDirection::kForward, spec));
  if (plan == nullptr) return false;
  const int64_t q_count = spec.batch * spec.seq_len * spec.heads * spec.head_dim;
  const int64_t kv_count = spec.batch * spec.kv_len * spec.kv_heads * spec.head_dim;
  const size_t lse_bytes = static_cast<size_t>(spec.batch * spec.heads * spec.seq_len) * 4;
  ScratchLayout layout;
  const size_t q16 = layout.Add(2 * q_count), k16 = layout.Add(2 * kv_count),
               v16 = layout.Add(2 * kv_count), out16 = layout.Add(2 * q_count),
               stats = layout.Add(lse_bytes), workspace = layout.Add(plan->workspace_bytes);
  TITAN_ASSIGN_OR_RETURN(StreamScratch scratch,
                         Scratch(layout.bytes(), "cuDNN attention forward's operands"));
  char* at = scratch.as<char>();
  const char* cast = "AttentionForward cast to bf16 (cuDNN)";
  TITAN_RETURN_IF_ERROR(CastToBf16(q, at + q16, q_count, cast));
  TITAN_RETURN_IF_ERROR(CastToBf16(k, at + k16, kv_count, cast));
  TITAN_RETURN_IF_ERROR(CastToBf16(v, at + v16, kv_count, cast));
  const CudnnAttention& state = *cudnn_attention_;
  TITAN_RETURN_IF_ERROR(
      ExecuteSdpaForward(*state.cudnn, state.handle, *plan,
                         {.q = at + q16,
                          .k = at + k16,
                          .v = at + v16,
                          .out = at + out16,
                          .stats = reinterpret_cast<float*>(at + stats),
                          .workspace = plan->workspace_bytes > 0 ? at + workspace : nullptr}));
  TITAN_RETURN_IF_ERROR(Check(
      LaunchCast(at + out16, FloatFormat::kBF16, out.data, FloatFormat::kF32, q_count, stream_),
      "AttentionForward cast of cuDNN's out to f32"));
  TITAN_RETURN_IF_ERROR(
      Check(cudaMemcpyAsync(lse.data, at + stats, lse_bytes, cudaMemcpyDeviceToDevice, stream_),
            "cudaMemcpyAsync (AttentionForward, cuDNN's log-sum-exps)"));
  return true;
}

// dq, dk and dv accumulate (the kernel table's contract): cuDNN writes bf16 gradients into
// scratch, which are added to them in f32.
absl::StatusOr<bool> CudaCompute::TryCudnnAttentionBackward(
    const AttentionSpec& spec, const TensorView& dout, const TensorView& q, const TensorView& k,
    const TensorView& v, const TensorView& out, const TensorView& lse, TensorView dq, TensorView dk,
    TensorView dv) {
  TITAN_ASSIGN_OR_RETURN(const SdpaPlan* plan, CudnnAttentionPlan(SdpaDirection::kBackward, spec));
  if (plan == nullptr) return false;
  const int64_t q_count = spec.batch * spec.seq_len * spec.heads * spec.head_dim;
  const int64_t kv_count = spec.batch * spec.kv_len * spec.kv_heads * spec.head_dim;
  const size_t rows_bytes = static_cast<size_t>(spec.batch * spec.heads * spec.seq_len) * 4;
  ScratchLayout layout;
  const size_t q16 = layout.Add(2 * q_count), k16 = layout.Add(2 * kv_count),
               v16 = layout.Add(2 * kv_count), out16 = layout.Add(2 * q_count),
               dout16 = layout.Add(2 * q_count), stats = layout.Add(rows_bytes),
               dq16 = layout.Add(2 * q_count), dk16 = layout.Add(2 * kv_count),
               dv16 = layout.Add(2 * kv_count), softmax_sum = layout.Add(rows_bytes),
               dq_accumulator = layout.Add(4 * q_count),
               workspace = layout.Add(plan->workspace_bytes);
  TITAN_ASSIGN_OR_RETURN(StreamScratch scratch,
                         Scratch(layout.bytes(), "cuDNN attention backward's operands"));
  char* at = scratch.as<char>();
  const char* cast = "AttentionBackward cast to bf16 (cuDNN)";
  TITAN_RETURN_IF_ERROR(CastToBf16(q, at + q16, q_count, cast));
  TITAN_RETURN_IF_ERROR(CastToBf16(k, at + k16, kv_count, cast));
  TITAN_RETURN_IF_ERROR(CastToBf16(v, at + v16, kv_count, cast));
  TITAN_RETURN_IF_ERROR(CastToBf16(out, at + out16, q_count, cast));
  TITAN_RETURN_IF_ERROR(CastToBf16(dout, at + dout16, q_count, cast));
  TITAN_RETURN_IF_ERROR(
      Check(cudaMemcpyAsync(at + stats, lse.data, rows_bytes, cudaMemcpyDeviceToDevice, stream_),
            "cudaMemcpyAsync (AttentionBackward, the log-sum-exps for cuDNN)"));
  // cuDNN before 9.6 adds into the accumulator without clearing it (the frontend clears it then).
  TITAN_RETURN_IF_ERROR(
      Check(cudaMemsetAsync(at + dq_accumulator, 0, 4 * static_cast<size_t>(q_count), stream_),
            "cudaMemsetAsync (AttentionBackward, cuDNN's dq accumulator)"));
  const CudnnAttention& state = *cudnn_attention_;
  TITAN_RETURN_IF_ERROR(
      ExecuteSdpaBackward(*state.cudnn, state.handle, *plan,
                          {.q = at + q16,
                           .k = at + k16,
                           .v = at + v16,
                           .out = at + out16,
                           .stats = reinterpret_cast<const float*>(at + stats),
                           .dout = at + dout16,
                           .dq = at + dq16,
                           .dk = at + dk16,
                           .dv = at + dv16,
                           .softmax_sum = reinterpret_cast<float*>(at + softmax_sum),
                           .dq_accumulator = reinterpret_cast<float*>(at + dq_accumulator),
                           .workspace = plan->workspace_bytes > 0 ? at + workspace : nullptr}));
  const char* add = "AttentionBackward accumulation of cuDNN's gradients";
  TITAN_RETURN_IF_ERROR(Check(LaunchAccumulate({at + dq16, true}, Out(dq), q_count, stream_), add));
  TITAN_RETURN_IF_ERROR(
      Check(LaunchAccumulate({at + dk16, true}, Out(dk), kv_count, stream_), add));
  TITAN_RETURN_IF_ERROR(
      Check(LaunchAccumulate({at + dv16, true}, Out(dv), kv_count, stream_), add));
  return true;
}

absl::Status CudaCompute::RunAttentionForward(const AttentionSpec& spec, const TensorView& q,
                                              const TensorView& k, const TensorView& v,
                                              TensorView out, TensorView lse) {
  TITAN_RETURN_IF_ERROR(CheckHeadDim("AttentionForward", spec));
  TITAN_RETURN_IF_ERROR(Ready());
  TITAN_ASSIGN_OR_RETURN(bool by_cudnn, TryCudnnAttentionForward(spec, q, k, v, out, lse));
  if (by_cudnn) return absl::OkStatus();
  return Check(LaunchAttentionForward(DimsOf(spec), F(q), F(k), F(v), F(out), F(lse), stream_),
               "AttentionForward kernel launch");
}

absl::Status CudaCompute::RunAttentionBackward(const AttentionSpec& spec, const TensorView& dout,
                                               const TensorView& q, const TensorView& k,
                                               const TensorView& v, const TensorView& out,
                                               const TensorView& lse, TensorView dq, TensorView dk,
                                               TensorView dv) {
  TITAN_RETURN_IF_ERROR(CheckHeadDim("AttentionBackward", spec));
  const int64_t rows = spec.batch * spec.heads * spec.seq_len;
  TITAN_RETURN_IF_ERROR(Ready());
  TITAN_ASSIGN_OR_RETURN(bool by_cudnn,
                         TryCudnnAttentionBackward(spec, dout, q, k, v, out, lse, dq, dk, dv));
  if (by_cudnn) return absl::OkStatus();
  TITAN_ASSIGN_OR_RETURN(StreamScratch row_dots, Scratch(static_cast<size_t>(rows) * sizeof(float),
                                                         "AttentionBackward rowsum(dout * out)"));
  return Check(LaunchAttentionBackward(DimsOf(spec), F(dout), F(q), F(k), F(v), F(out), F(lse),
                                       F(dq), F(dk), F(dv), row_dots.as<float>(), stream_),
               "AttentionBackward kernel launch");
}

absl::Status CudaCompute::RunAttentionMerge(const AttentionSpec& spec, const TensorView& part_out,
                                            const TensorView& part_lse, TensorView out,
                                            TensorView lse) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(
      LaunchAttentionMerge(DimsOf(spec), F(part_out), F(part_lse), F(out), F(lse), stream_),
      "AttentionMerge kernel launch");
}

}  // namespace titan::cuda
