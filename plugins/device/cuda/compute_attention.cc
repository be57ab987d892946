// Attention of the CUDA compute: the kernels' own head_dim limit, on top of the kernel table's
// operand checks (which have run), then cuDNN's fused flash attention where attention_route.h
// picks it (the forward), else titan's tiled kernels (attention_kernels.cu).
#include <cstdio>
#include <mutex>
#include <optional>
#include <utility>

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

// An attention operand as the f32 that the tiled kernels take: the operand's memory when it is
// f32; else a copy in stream-ordered scratch, widened from it (Prepare, for the operands a kernel
// reads) and rounded back into it once (Store, for those it writes).
class DeviceF32 {
 public:
  DeviceF32(const TensorView& x, cudaStream_t stream) : x_(x), stream_(stream) {}
  absl::Status Prepare(bool read, const char* what) {
    if (x_.dtype == DType::kF32) return absl::OkStatus();
    const int64_t n = x_.numel();
    TITAN_ASSIGN_OR_RETURN(
        StreamScratch copy,
        StreamScratch::Allocate(static_cast<size_t>(n) * sizeof(float), stream_, what));
    copy_.emplace(std::move(copy));
    if (!read) return absl::OkStatus();
    return Check(
        LaunchCast(x_.data, FloatFormat::kBF16, copy_->as<float>(), FloatFormat::kF32, n, stream_),
        what);
  }
  float* get() const { return copy_ ? copy_->as<float>() : static_cast<float*>(x_.data); }
  absl::Status Store(const char* what) const {
    if (!copy_) return absl::OkStatus();
    return Check(LaunchCast(copy_->as<float>(), FloatFormat::kF32, x_.data, FloatFormat::kBF16,
                            x_.numel(), stream_),
                 what);
  }

 private:
  TensorView x_;
  cudaStream_t stream_;
  std::optional<StreamScratch> copy_;
};

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
                   "'s fused flash attention in bf16 (f32 operands cast to bf16 and results "
                   "back, bf16 ones used as they are; f32 log-sum-exps; job.attention = \"",
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
  // bf16 operands (q, k, v and out share a dtype: the kernel table) are cuDNN's as they are.
  const bool f32 = q.dtype == DType::kF32;
  ScratchLayout layout;
  const size_t q16 = f32 ? layout.Add(2 * q_count) : 0, k16 = f32 ? layout.Add(2 * kv_count) : 0,
               v16 = f32 ? layout.Add(2 * kv_count) : 0, out16 = f32 ? layout.Add(2 * q_count) : 0,
               stats = layout.Add(lse_bytes), workspace = layout.Add(plan->workspace_bytes);
  TITAN_ASSIGN_OR_RETURN(StreamScratch scratch,
                         Scratch(layout.bytes(), "cuDNN attention forward's operands"));
  char* at = scratch.as<char>();
  if (f32) {
    const char* cast = "AttentionForward cast to bf16 (cuDNN)";
    TITAN_RETURN_IF_ERROR(CastToBf16(q, at + q16, q_count, cast));
    TITAN_RETURN_IF_ERROR(CastToBf16(k, at + k16, kv_count, cast));
    TITAN_RETURN_IF_ERROR(CastToBf16(v, at + v16, kv_count, cast));
  }
  void* out_bf16 = f32 ? at + out16 : out.data;
  const CudnnAttention& state = *cudnn_attention_;
  TITAN_RETURN_IF_ERROR(
      ExecuteSdpaForward(*state.cudnn, state.handle, *plan,
                         {.q = f32 ? at + q16 : q.data,
                          .k = f32 ? at + k16 : k.data,
                          .v = f32 ? at + v16 : v.data,
                          .out = out_bf16,
                          .stats = reinterpret_cast<float*>(at + stats),
                          .workspace = plan->workspace_bytes > 0 ? at + workspace : nullptr}));
  if (f32) {
    TITAN_RETURN_IF_ERROR(Check(
        LaunchCast(out_bf16, FloatFormat::kBF16, out.data, FloatFormat::kF32, q_count, stream_),
        "AttentionForward cast of cuDNN's out to f32"));
  }
  TITAN_RETURN_IF_ERROR(
      Check(cudaMemcpyAsync(lse.data, at + stats, lse_bytes, cudaMemcpyDeviceToDevice, stream_),
            "cudaMemcpyAsync (AttentionForward, cuDNN's log-sum-exps)"));
  return true;
}

// dq, dk and dv accumulate (the kernel table's contract): cuDNN writes bf16 gradients into
// scratch, which are added to them in f32 (and rounded once where they are bf16).
absl::StatusOr<bool> CudaCompute::TryCudnnAttentionBackward(
    const AttentionSpec& spec, const TensorView& dout, const TensorView& q, const TensorView& k,
    const TensorView& v, const TensorView& out, const TensorView& lse, TensorView dq, TensorView dk,
    TensorView dv) {
  TITAN_ASSIGN_OR_RETURN(const SdpaPlan* plan, CudnnAttentionPlan(SdpaDirection::kBackward, spec));
  if (plan == nullptr) return false;
  const int64_t q_count = spec.batch * spec.seq_len * spec.heads * spec.head_dim;
  const int64_t kv_count = spec.batch * spec.kv_len * spec.kv_heads * spec.head_dim;
  const size_t rows_bytes = static_cast<size_t>(spec.batch * spec.heads * spec.seq_len) * 4;
  const bool f32 = q.dtype == DType::kF32;  // bf16 operands are cuDNN's as they are
  ScratchLayout layout;
  const size_t q16 = f32 ? layout.Add(2 * q_count) : 0, k16 = f32 ? layout.Add(2 * kv_count) : 0,
               v16 = f32 ? layout.Add(2 * kv_count) : 0, out16 = f32 ? layout.Add(2 * q_count) : 0,
               dout16 = f32 ? layout.Add(2 * q_count) : 0, stats = layout.Add(rows_bytes),
               dq16 = layout.Add(2 * q_count), dk16 = layout.Add(2 * kv_count),
               dv16 = layout.Add(2 * kv_count), softmax_sum = layout.Add(rows_bytes),
               dq_accumulator = layout.Add(4 * q_count),
               workspace = layout.Add(plan->workspace_bytes);
  TITAN_ASSIGN_OR_RETURN(StreamScratch scratch,
                         Scratch(layout.bytes(), "cuDNN attention backward's operands"));
  char* at = scratch.as<char>();
  if (f32) {
    const char* cast = "AttentionBackward cast to bf16 (cuDNN)";
    TITAN_RETURN_IF_ERROR(CastToBf16(q, at + q16, q_count, cast));
    TITAN_RETURN_IF_ERROR(CastToBf16(k, at + k16, kv_count, cast));
    TITAN_RETURN_IF_ERROR(CastToBf16(v, at + v16, kv_count, cast));
    TITAN_RETURN_IF_ERROR(CastToBf16(out, at + out16, q_count, cast));
    TITAN_RETURN_IF_ERROR(CastToBf16(dout, at + dout16, q_count, cast));
  }
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
                          {.q = f32 ? at + q16 : q.data,
                           .k = f32 ? at + k16 : k.data,
                           .v = f32 ? at + v16 : v.data,
                           .out = f32 ? at + out16 : out.data,
                           .stats = reinterpret_cast<const float*>(at + stats),
                           .dout = f32 ? at + dout16 : dout.data,
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
  const char* widen = "AttentionForward's f32 copy of a bf16 operand (tiled kernels)";
  DeviceF32 q32(q, stream_), k32(k, stream_), v32(v, stream_), out32(out, stream_);
  TITAN_RETURN_IF_ERROR(q32.Prepare(true, widen));
  TITAN_RETURN_IF_ERROR(k32.Prepare(true, widen));
  TITAN_RETURN_IF_ERROR(v32.Prepare(true, widen));
  TITAN_RETURN_IF_ERROR(out32.Prepare(false, widen));
  TITAN_RETURN_IF_ERROR(Check(LaunchAttentionForward(DimsOf(spec), q32.get(), k32.get(), v32.get(),
                                                     out32.get(), F(lse), stream_),
                              "AttentionForward kernel launch"));
  return out32.Store("AttentionForward's rounding of out to bf16");
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
  const char* widen = "AttentionBackward's f32 copy of a bf16 operand (tiled kernels)";
  DeviceF32 dout32(dout, stream_), q32(q, stream_), k32(k, stream_), v32(v, stream_),
      out32(out, stream_), dq32(dq, stream_), dk32(dk, stream_), dv32(dv, stream_);
  for (DeviceF32* x : {&dout32, &q32, &k32, &v32, &out32, &dq32, &dk32, &dv32}) {
    TITAN_RETURN_IF_ERROR(x->Prepare(true, widen));  // dq, dk and dv accumulate
  }
  TITAN_RETURN_IF_ERROR(
      Check(LaunchAttentionBackward(DimsOf(spec), dout32.get(), q32.get(), k32.get(), v32.get(),
                                    out32.get(), F(lse), dq32.get(), dk32.get(), dv32.get(),
                                    row_dots.as<float>(), stream_),
            "AttentionBackward kernel launch"));
  const char* round = "AttentionBackward's rounding of a gradient to bf16";
  for (const DeviceF32* x : {&dq32, &dk32, &dv32}) TITAN_RETURN_IF_ERROR(x->Store(round));
  return absl::OkStatus();
}

absl::Status CudaCompute::RunAttentionMerge(const AttentionSpec& spec, const TensorView& part_out,
                                            const TensorView& part_lse, TensorView out,
                                            TensorView lse) {
  TITAN_RETURN_IF_ERROR(Ready());
  const char* widen = "AttentionMerge's f32 copy of a bf16 operand";
  DeviceF32 part32(part_out, stream_), out32(out, stream_);
  TITAN_RETURN_IF_ERROR(part32.Prepare(true, widen));
  TITAN_RETURN_IF_ERROR(out32.Prepare(true, widen));
  TITAN_RETURN_IF_ERROR(Check(
      LaunchAttentionMerge(DimsOf(spec), part32.get(), F(part_lse), out32.get(), F(lse), stream_),
      "AttentionMerge kernel launch"));
  return out32.Store("AttentionMerge's rounding of out to bf16");
}

}  // namespace titan::cuda
