#include "core/cpu/cpu_compute.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/cpu/f32_image.h"
#include "core/runtime/profiler.h"
#include "core/tensor/attention.h"
#include "core/tensor/attention_bf16.h"
#include "core/tensor/bf16_gemm.h"
#include "core/tensor/blas_kernels.h"
#include "core/tensor/cross_entropy.h"
#include "core/tensor/dtype.h"
#include "core/tensor/embedding.h"
#include "core/tensor/internal/gemm.h"
#include "core/tensor/rmsnorm.h"
#include "core/tensor/rope.h"
#include "core/tensor/swiglu.h"
#include "core/tensor/vector_kernels.h"
#include "titan/float16.h"
#include "titan/truncated_normal.h"

namespace titan {
namespace {

float* F(const TensorView& x) { return x.data_as<float>(); }
const int32_t* I(const TensorView& x) { return x.data_as<const int32_t>(); }

AttentionShape ShapeOf(const AttentionSpec& s) {
  return {s.batch, s.seq_len, s.heads, s.kv_heads, s.head_dim, s.kv_len, s.q_offset - s.kv_offset};
}

// [rows, columns] of a 2-D operand, transposed when asked.
struct Matrix {
  int64_t rows, columns;
};
Matrix Op(const TensorView& x, bool transpose) {
  return transpose ? Matrix{x.shape[1], x.shape[0]} : Matrix{x.shape[0], x.shape[1]};
}

using Use = F32Image::Use;

}  // namespace

CpuCompute& CpuCompute::Get() {
  static CpuCompute compute;
  return compute;
}

std::string CpuCompute::Describe() const {
  return absl::StrCat("cpu: f32 GEMM by ", BlasKernels(), "; bf16 GEMM ", Bf16GemmPath(),
                      "; attention in the matmuls' precision (in bf16: its two GEMMs per tile by "
                      "the bf16 GEMM, softmax and sums in f32); vector kernels for ",
                      VectorKernelsTarget(), " (Highway)");
}

absl::Status CpuCompute::RunGemm(const TensorView& a, bool transpose_a, const TensorView& b,
                                 bool transpose_b, float alpha, float beta, TensorView c) {
  ScopedSpan span("kernel", "Gemm");
  const Matrix opa = Op(a, transpose_a), opb = Op(b, transpose_b);
  const int64_t m = opa.rows, n = opb.columns, k = opa.columns;
  if (a.dtype == DType::kBF16) {
    const F32Image c32(c, beta != 0.0f ? Use::kReadWrite : Use::kWrite);
    TITAN_RETURN_IF_ERROR(Bf16Gemm(transpose_a, transpose_b, m, n, k, alpha,
                                   a.data_as<const uint16_t>(), b.data_as<const uint16_t>(), beta,
                                   c32.get()));
    c32.Store();
    return absl::OkStatus();
  }
  internal::Gemm(transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
                 m, n, k, alpha, F(a), a.shape[1], F(b), b.shape[1], beta, F(c), n);
  return absl::OkStatus();
}

// One group after another, each as Gemm runs it (OpenBLAS or oneDNN use both cores inside it).
absl::Status CpuCompute::RunGroupedGemm(std::span<const GemmGroup> groups, bool transpose_a,
                                        bool transpose_b, float alpha, float beta) {
  ScopedSpan span("kernel", "GroupedGemm");
  for (const GemmGroup& group : groups) {
    TITAN_RETURN_IF_ERROR(
        RunGemm(group.a, transpose_a, group.b, transpose_b, alpha, beta, group.c));
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::RunAttentionForward(const AttentionSpec& spec, const TensorView& q,
                                             const TensorView& k, const TensorView& v,
                                             TensorView out, TensorView lse) {
  ScopedSpan span("kernel", "AttentionForward");
  const F32Image q32(q, Use::kRead), k32(k, Use::kRead), v32(v, Use::kRead);
  const F32Image out32(out, Use::kWrite);
  if (spec.matmul_dtype == DType::kBF16) {
    TITAN_RETURN_IF_ERROR(
        AttentionForwardBf16(out32.get(), F(lse), q32.get(), k32.get(), v32.get(), ShapeOf(spec)));
  } else {
    titan::AttentionForward(out32.get(), F(lse), q32.get(), k32.get(), v32.get(), ShapeOf(spec));
  }
  out32.Store();
  return absl::OkStatus();
}

absl::Status CpuCompute::RunAttentionBackward(const AttentionSpec& spec, const TensorView& dout,
                                              const TensorView& q, const TensorView& k,
                                              const TensorView& v, const TensorView& out,
                                              const TensorView& lse, TensorView dq, TensorView dk,
                                              TensorView dv) {
  ScopedSpan span("kernel", "AttentionBackward");
  const F32Image dout32(dout, Use::kRead), q32(q, Use::kRead), k32(k, Use::kRead);
  const F32Image v32(v, Use::kRead), out32(out, Use::kRead);
  const F32Image dq32(dq, Use::kReadWrite), dk32(dk, Use::kReadWrite), dv32(dv, Use::kReadWrite);
  if (spec.matmul_dtype == DType::kBF16) {
    TITAN_RETURN_IF_ERROR(AttentionBackwardBf16(dq32.get(), dk32.get(), dv32.get(), dout32.get(),
                                                q32.get(), k32.get(), v32.get(), out32.get(),
                                                F(lse), ShapeOf(spec)));
  } else {
    titan::AttentionBackward(dq32.get(), dk32.get(), dv32.get(), dout32.get(), q32.get(), k32.get(),
                             v32.get(), out32.get(), F(lse), ShapeOf(spec));
  }
  dq32.Store();
  dk32.Store();
  dv32.Store();
  return absl::OkStatus();
}

absl::Status CpuCompute::RunAttentionMerge(const AttentionSpec& spec, const TensorView& part_out,
                                           const TensorView& part_lse, TensorView out,
                                           TensorView lse) {
  ScopedSpan span("kernel", "AttentionMerge");
  const int64_t hd = spec.head_dim;
  const F32Image part32(part_out, Use::kRead), out32(out, Use::kReadWrite);
  const float* po = part32.get();
  const float* pl = F(part_lse);
  float* o = out32.get();
  float* l = F(lse);
  const int64_t t = spec.seq_len, h = spec.heads;
  // out is [b, t, heads, hd], lse [b, heads, t].
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < spec.batch; ++b) {
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t head = 0; head < h; ++head) {
        const int64_t at = (b * h + head) * t + i;
        const float mine = l[at], theirs = pl[at];
        if (theirs == -std::numeric_limits<float>::infinity()) continue;
        float* row = o + ((b * t + i) * h + head) * hd;
        const float* part = po + ((b * t + i) * h + head) * hd;
        if (mine == -std::numeric_limits<float>::infinity()) {
          std::copy(part, part + hd, row);
          l[at] = theirs;
          continue;
        }
        const float top = std::max(mine, theirs);
        const float merged = top + std::log(std::exp(mine - top) + std::exp(theirs - top));
        const float keep = std::exp(mine - merged), add = std::exp(theirs - merged);
        for (int64_t d = 0; d < hd; ++d) row[d] = row[d] * keep + part[d] * add;
        l[at] = merged;
      }
    }
  }
  out32.Store();
  return absl::OkStatus();
}

absl::Status CpuCompute::RunRmsNormForward(const TensorView& inp, const TensorView& weight,
                                           double eps, TensorView out, TensorView rstd) {
  ScopedSpan span("kernel", "RmsNormForward");
  const int64_t n = inp.shape[0], c = inp.shape[1];
  const F32Image x(inp, Use::kRead), y(out, Use::kWrite);
  VectorRmsNormForward(y.get(), F(rstd), x.get(), F(weight), n, c, eps);
  y.Store();
  return absl::OkStatus();
}

absl::Status CpuCompute::RunRmsNormBackward(const TensorView& dout, const TensorView& inp,
                                            const TensorView& weight, const TensorView& rstd,
                                            TensorView dinp, TensorView dweight) {
  ScopedSpan span("kernel", "RmsNormBackward");
  const int64_t n = inp.shape[0], c = inp.shape[1];
  const F32Image dy(dout, Use::kRead), x(inp, Use::kRead), dx(dinp, Use::kReadWrite);
  VectorRmsNormBackward(dx.get(), F(dweight), dy.get(), x.get(), F(weight), F(rstd), n, c);
  dx.Store();
  return absl::OkStatus();
}

absl::Status CpuCompute::RunRopeTable(const RopeSpec& spec, int64_t position_offset, TensorView cos,
                                      TensorView sin) {
  ScopedSpan span("kernel", "RopeTable");
  const RopeConfig config{spec.theta,           spec.scaled,           spec.scale_factor,
                          spec.low_freq_factor, spec.high_freq_factor, spec.original_context};
  titan::RopeTable(F(cos), F(sin), cos.shape[0], spec.head_dim, config, position_offset);
  return absl::OkStatus();
}

absl::Status CpuCompute::RunRopeForward(const TensorView& cos, const TensorView& sin,
                                        TensorView x) {
  ScopedSpan span("kernel", "RopeForward");
  const F32Image x32(x, Use::kReadWrite);
  VectorRopeForward(x32.get(), F(cos), F(sin), x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
  x32.Store();
  return absl::OkStatus();
}

absl::Status CpuCompute::RunRopeBackward(const TensorView& cos, const TensorView& sin,
                                         TensorView dx) {
  ScopedSpan span("kernel", "RopeBackward");
  const F32Image dx32(dx, Use::kReadWrite);
  VectorRopeBackward(dx32.get(), F(cos), F(sin), dx.shape[0], dx.shape[1], dx.shape[2],
                     dx.shape[3]);
  dx32.Store();
  return absl::OkStatus();
}

absl::Status CpuCompute::RunSwiGluForward(const TensorView& a, const TensorView& b,
                                          TensorView out) {
  ScopedSpan span("kernel", "SwiGluForward");
  const F32Image a32(a, Use::kRead), b32(b, Use::kRead), out32(out, Use::kWrite);
  VectorSwiGluForward(out32.get(), a32.get(), b32.get(), a.numel());
  out32.Store();
  return absl::OkStatus();
}

absl::Status CpuCompute::RunSwiGluBackward(const TensorView& dout, const TensorView& a,
                                           const TensorView& b, TensorView da, TensorView db) {
  ScopedSpan span("kernel", "SwiGluBackward");
  const F32Image dout32(dout, Use::kRead), a32(a, Use::kRead), b32(b, Use::kRead);
  const F32Image da32(da, Use::kReadWrite), db32(db, Use::kReadWrite);
  VectorSwiGluBackward(da32.get(), db32.get(), dout32.get(), a32.get(), b32.get(), a.numel());
  da32.Store();
  db32.Store();
  return absl::OkStatus();
}

absl::Status CpuCompute::RunEmbeddingForward(const TensorView& tokens, const TensorView& table,
                                             int64_t first_row, TensorView out) {
  ScopedSpan span("kernel", "EmbeddingForward");
  const int64_t n = tokens.numel(), c = table.shape[1];
  const F32Image out32(out, Use::kWrite);
  titan::EmbeddingForward(out32.get(), I(tokens), F(table), n, c, first_row, table.shape[0]);
  out32.Store();
  return absl::OkStatus();
}

absl::Status CpuCompute::RunEmbeddingBackward(const TensorView& tokens, const TensorView& dout,
                                              int64_t first_row, TensorView dtable) {
  ScopedSpan span("kernel", "EmbeddingBackward");
  const int64_t n = tokens.numel(), c = dtable.shape[1];
  const F32Image dout32(dout, Use::kRead);
  titan::EmbeddingBackward(F(dtable), dout32.get(), I(tokens), n, c, first_row, dtable.shape[0]);
  return absl::OkStatus();
}

absl::Status CpuCompute::RunCrossEntropyRowMax(const TensorView& logits, TensorView max) {
  ScopedSpan span("kernel", "CrossEntropyRowMax");
  const F32Image logits32(logits, Use::kRead);
  VectorCrossEntropyRowMax(F(max), logits32.get(), logits.shape[0], logits.shape[1]);
  return absl::OkStatus();
}

absl::Status CpuCompute::RunCrossEntropySumExp(const TensorView& logits, const TensorView& max,
                                               TensorView sum) {
  ScopedSpan span("kernel", "CrossEntropySumExp");
  const F32Image logits32(logits, Use::kRead);
  VectorCrossEntropySumExp(F(sum), logits32.get(), F(max), logits.shape[0], logits.shape[1]);
  return absl::OkStatus();
}

absl::Status CpuCompute::RunCrossEntropyTargetLogit(const TensorView& logits,
                                                    const TensorView& targets, int64_t first_column,
                                                    TensorView target) {
  ScopedSpan span("kernel", "CrossEntropyTargetLogit");
  const F32Image logits32(logits, Use::kRead);
  titan::CrossEntropyTargetLogit(F(target), logits32.get(), I(targets), logits.shape[0],
                                 logits.shape[1], first_column);
  return absl::OkStatus();
}

absl::Status CpuCompute::RunCrossEntropyFinish(const TensorView& max, const TensorView& target,
                                               const TensorView& targets, TensorView sum_to_lse,
                                               TensorView loss) {
  ScopedSpan span("kernel", "CrossEntropyFinish");
  *F(loss) =
      titan::CrossEntropyFinish(F(sum_to_lse), F(max), F(target), I(targets), targets.numel());
  return absl::OkStatus();
}

absl::Status CpuCompute::RunCrossEntropyBackward(const TensorView& logits, const TensorView& lse,
                                                 const TensorView& targets, int64_t first_column,
                                                 float dloss, TensorView dlogits) {
  ScopedSpan span("kernel", "CrossEntropyBackward");
  // dlogits may be the logits' memory: in f32 the kernel runs in place as ever; in bf16 the
  // logits are widened into their image before the result is rounded over them.
  const F32Image logits32(logits, Use::kRead), dlogits32(dlogits, Use::kWrite);
  VectorCrossEntropyBackward(dlogits32.get(), logits32.get(), F(lse), I(targets), logits.shape[0],
                             logits.shape[1], dloss, first_column);
  dlogits32.Store();
  return absl::OkStatus();
}

absl::Status CpuCompute::RunAdamStep(const AdamUpdate& u, TensorView params,
                                     const TensorView& grads, TensorView exp_avg,
                                     TensorView exp_avg_sq) {
  ScopedSpan span("kernel", "AdamStep");
  const int64_t n = params.numel();
  VectorAdamUpdate(MakeAdamConstants(u), F(params), F(grads), F(exp_avg), F(exp_avg_sq), n);
  return absl::OkStatus();
}

absl::Status CpuCompute::RunSgdStep(const SgdUpdate& u, TensorView params, const TensorView& grads,
                                    TensorView momentum_buffer) {
  ScopedSpan span("kernel", "SgdStep");
  VectorSgdUpdate(MakeSgdConstants(u), F(params), F(grads), F(momentum_buffer), params.numel());
  return absl::OkStatus();
}

absl::Status CpuCompute::RunSumOfSquares(std::span<const TensorView> tensors,
                                         std::span<const double> weights, TensorView out) {
  ScopedSpan span("kernel", "SumOfSquares");
  double total = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    total += weights[t] * VectorSumOfSquares(F(tensors[t]), tensors[t].numel());
  }
  F(out)[0] = static_cast<float>(total);
  F(out)[1] = std::isfinite(total) ? static_cast<float>(total - static_cast<double>(F(out)[0])) : 0;
  return absl::OkStatus();
}

absl::Status CpuCompute::RunAbsMax(std::span<const TensorView> tensors, TensorView out) {
  ScopedSpan span("kernel", "AbsMax");
  for (size_t t = 0; t < tensors.size(); ++t) {
    const TensorView& x = tensors[t];
    const int64_t n = x.numel();
    float amax = 0.0f;
    bool nan = false;
#pragma omp parallel for reduction(max : amax) reduction(|| : nan)
    for (int64_t i = 0; i < n; ++i) {
      const float v = std::fabs(LoadAsF32(x.data, x.dtype, i));
      nan = nan || std::isnan(v);
      amax = std::max(amax, v);
    }
    F(out)[t] = nan ? std::numeric_limits<float>::quiet_NaN() : amax;
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::RunCast(const TensorView& src, TensorView dst) {
  ScopedSpan span("kernel", "Cast");
  return ConvertTensor(src, dst);
}

absl::Status CpuCompute::RunFillTruncatedNormal(TensorView x, uint64_t key, double std, double low,
                                                double high) {
  ScopedSpan span("kernel", "FillTruncatedNormal");
  float* data = F(x);
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) data[i] = truncated_normal::At(key, i, std, low, high);
  return absl::OkStatus();
}

absl::Status CpuCompute::RunFill(TensorView x, float value) {
  ScopedSpan span("kernel", "Fill");
  const int64_t n = x.numel();
  if (value == 0.0f && !std::signbit(value)) {  // +0 is all zero bits in f32 and bf16
    std::memset(x.data, 0, x.nbytes());
    return absl::OkStatus();
  }
  if (x.dtype == DType::kBF16) {
    uint16_t* data = x.data_as<uint16_t>();
    const uint16_t rounded = F32ToBf16(value);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) data[i] = rounded;
    return absl::OkStatus();
  }
  float* data = F(x);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) data[i] = value;
  return absl::OkStatus();
}

absl::Status CpuCompute::RunScale(TensorView x, float scale) {
  ScopedSpan span("kernel", "Scale");
  float* data = F(x);
  const int64_t n = x.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) data[i] *= scale;
  return absl::OkStatus();
}

absl::Status CpuCompute::RunAccumulate(const TensorView& x, TensorView out) {
  ScopedSpan span("kernel", "Accumulate");
  const F32Image x32(x, Use::kRead), out32(out, Use::kReadWrite);
  float* o = out32.get();
  const float* in = x32.get();
  const int64_t n = out.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) o[i] += in[i];
  out32.Store();
  return absl::OkStatus();
}

absl::Status CpuCompute::RunCopy(const TensorView& src, TensorView dst) {
  ScopedSpan span("kernel", "Copy");
  if (src.data != dst.data) std::memmove(dst.data, src.data, src.nbytes());
  return absl::OkStatus();
}

absl::Status CpuCompute::RunTranspose(const TensorView& src, TensorView dst) {
  ScopedSpan span("kernel", "Transpose");
  const int64_t rows = src.shape[0], columns = src.shape[1];
  const size_t size = DTypeSize(src.dtype);
  const auto* in = static_cast<const unsigned char*>(src.data);
  auto* out = static_cast<unsigned char*>(dst.data);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < columns; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(out + (c * rows + r) * size, in + (r * columns + c) * size, size);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::RunCopyToHost(const TensorView& src, void* host_dst) {
  ScopedSpan span("kernel", "CopyToHost");
  std::memcpy(host_dst, src.data, src.nbytes());
  return absl::OkStatus();
}

absl::Status CpuCompute::RunCopyFromHost(const void* host_src, TensorView dst) {
  ScopedSpan span("kernel", "CopyFromHost");
  std::memcpy(dst.data, host_src, dst.nbytes());
  return absl::OkStatus();
}

absl::StatusOr<EventHandle> CpuCompute::RecordEvent(StreamHandle stream) {
  if (stream != nullptr) return absl::InvalidArgumentError("RecordEvent: the cpu has one stream");
  return EventHandle{nullptr};
}

absl::Status CpuCompute::StreamWaitEvent(StreamHandle stream, EventHandle) {
  if (stream != nullptr) {
    return absl::InvalidArgumentError("StreamWaitEvent: the cpu has one stream");
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::SynchronizeEvent(EventHandle) { return absl::OkStatus(); }

}  // namespace titan
