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

// Offsets of the cuDNN call's buffers in one scratch allocation, each 256-byte aligned.
struct SdpaScratch {
  size_t q, k, v, out, stats, workspace, bytes;
};
SdpaScratch LayOut(const AttentionSpec& s, int64_t workspace_bytes) {
  const auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const size_t q_bytes = static_cast<size_t>(s.batch * s.seq_len * s.heads * s.head_dim) * 2;
  const size_t kv_bytes = static_cast<size_t>(s.batch * s.kv_len * s.kv_heads * s.head_dim) * 2;
  const size_t stats_bytes = static_cast<size_t>(s.batch * s.heads * s.seq_len) * sizeof(float);
  SdpaScratch at{};
  at.q = 0;
  at.k = at.q + aligned(q_bytes);
  at.v = at.k + aligned(kv_bytes);
  at.out = at.v + aligned(kv_bytes);
  at.stats = at.out + aligned(q_bytes);
  at.workspace = at.stats + aligned(stats_bytes);
  at.bytes = at.workspace + aligned(static_cast<size_t>(workspace_bytes));
  return at;
}

}  // namespace

void CudaCompute::LogAttentionOnce(const std::string& key, const std::string& line) {
  if (cudnn_attention_->logged.insert(key).second) std::fprintf(stderr, "%s\n", line.c_str());
}

AttentionRoute CudaCompute::RouteAttention(const AttentionSpec& spec) {
  // kAuto's decision is taken once, at the first attention, so a run's attention is one kind.
  if (attention_mode_ == AttentionMode::kAuto && bf16_run_ < 0) bf16_run_ = bf16_gemms_ ? 1 : 0;
  AttentionCase c{.mode = attention_mode_,
                  .bf16_run = bf16_run_ == 1,
                  .capability = capability_,
                  .cudnn_loaded = true,
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
  LogAttentionOnce(route.reason, absl::StrCat("cuda: attention by titan's tiled f32 kernels "
                                              "from now on: ",
                                              route.reason));
  return route;
}

absl::StatusOr<bool> CudaCompute::TryCudnnAttentionForward(const AttentionSpec& spec,
                                                           const TensorView& q, const TensorView& k,
                                                           const TensorView& v, TensorView out,
                                                           TensorView lse) {
  const AttentionRoute route = RouteAttention(spec);
  if (!route.cudnn) {
    LogAttentionOnce(route.reason,
                     absl::StrCat("cuda: attention forward by titan's tiled f32 kernels: ",
                                  route.reason, " (first for ", ShapeText(spec), ")"));
    return false;
  }
  CudnnAttention& state = *cudnn_attention_;
  const Cudnn& cudnn = *state.cudnn;
  const SdpaShape shape{spec.batch, spec.seq_len, spec.heads, spec.kv_heads, spec.head_dim};
  std::lock_guard<std::mutex> held(state.forward_plans->lock());
  absl::StatusOr<SdpaForwardPlan*> plan = state.forward_plans->FindOrBuild(shape, [&] {
    absl::StatusOr<SdpaForwardPlan> built = BuildSdpaForwardPlan(cudnn, state.handle, shape);
    if (built.ok()) {
      LogAttentionOnce(
          ShapeText(spec),
          absl::StrCat(
              "cuda: attention forward by cuDNN ", CudnnVersionText(cudnn.version),
              "'s fused flash attention in bf16 (q, k, v cast from f32, out cast back, f32 "
              "log-sum-exps; job.attention = \"",
              AttentionModeName(attention_mode_), "\"",
              attention_mode_ == AttentionMode::kAuto ? ": the run's GEMMs are bf16" : "", ") for ",
              ShapeText(spec), ": engine configuration ", built->engine, ", ",
              built->workspace_bytes,
              " bytes of workspace; the backward runs in titan's tiled f32 "
              "kernels"));
      return built;
    }
    // Any refusal at build time is remembered as one (Unimplemented), so the shape falls back
    // once and for all, and said once.
    LogAttentionOnce(
        ShapeText(spec),
        absl::StrCat("cuda: attention forward by titan's tiled f32 kernels for ", ShapeText(spec),
                     ": cuDNN refused the shape: ", built.status().message()));
    return absl::StatusOr<SdpaForwardPlan>(absl::UnimplementedError(built.status().message()));
  });
  if (!plan.ok()) return false;

  const SdpaScratch at = LayOut(spec, (*plan)->workspace_bytes);
  TITAN_ASSIGN_OR_RETURN(StreamScratch scratch, Scratch(at.bytes, "cuDNN attention's operands"));
  char* base = scratch.as<char>();
  const int64_t q_count = spec.batch * spec.seq_len * spec.heads * spec.head_dim;
  const int64_t kv_count = spec.batch * spec.kv_len * spec.kv_heads * spec.head_dim;
  const size_t lse_bytes = static_cast<size_t>(spec.batch * spec.heads * spec.seq_len) * 4;
  const auto cast = [&](const TensorView& from, size_t to, int64_t count) {
    return Check(
        LaunchCast(from.data, FloatFormat::kF32, base + to, FloatFormat::kBF16, count, stream_),
        "AttentionForward cast to bf16 (cuDNN)");
  };
  TITAN_RETURN_IF_ERROR(cast(q, at.q, q_count));
  TITAN_RETURN_IF_ERROR(cast(k, at.k, kv_count));
  TITAN_RETURN_IF_ERROR(cast(v, at.v, kv_count));
  TITAN_RETURN_IF_ERROR(ExecuteSdpaForward(
      cudnn, state.handle, **plan,
      {.q = base + at.q,
       .k = base + at.k,
       .v = base + at.v,
       .out = base + at.out,
       .stats = reinterpret_cast<float*>(base + at.stats),
       .workspace = (*plan)->workspace_bytes > 0 ? base + at.workspace : nullptr}));
  TITAN_RETURN_IF_ERROR(Check(
      LaunchCast(base + at.out, FloatFormat::kBF16, out.data, FloatFormat::kF32, q_count, stream_),
      "AttentionForward cast of cuDNN's out to f32"));
  TITAN_RETURN_IF_ERROR(Check(
      cudaMemcpyAsync(lse.data, base + at.stats, lse_bytes, cudaMemcpyDeviceToDevice, stream_),
      "cudaMemcpyAsync (AttentionForward, cuDNN's log-sum-exps)"));
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
