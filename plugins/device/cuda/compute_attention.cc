// Attention of the CUDA compute: operand checks as the CPU's, then attention_kernels.cu.
#include "absl/strings/str_cat.h"
#include "attention_kernels.h"
#include "cuda_compute.h"
#include "cuda_status.h"
#include "operands.h"

namespace titan::cuda {
namespace {

AttentionDims DimsOf(const AttentionSpec& s) {
  return {s.batch, s.seq_len, s.kv_len, s.heads, s.kv_heads, s.head_dim, s.q_offset - s.kv_offset};
}

absl::Status CheckAttention(const char* kernel, const AttentionSpec& s, const TensorView& q,
                            const TensorView& k, const TensorView& v) {
  if (s.head_dim > kMaxAttentionHeadDim) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": head_dim ", s.head_dim,
                                                   " exceeds the cuda kernel's limit of ",
                                                   kMaxAttentionHeadDim));
  }
  return CheckAttentionOperands(kernel, s, q, k, v, DeviceType::kCuda);
}

}  // namespace

absl::Status CudaCompute::AttentionForward(const AttentionSpec& spec, const TensorView& q,
                                           const TensorView& k, const TensorView& v, TensorView out,
                                           TensorView lse) {
  TITAN_RETURN_IF_ERROR(CheckAttention("AttentionForward", spec, q, k, v));
  TITAN_RETURN_IF_ERROR(Expect("AttentionForward", "out", out, DType::kF32, q.numel()));
  TITAN_RETURN_IF_ERROR(
      Expect("AttentionForward", "lse", lse, DType::kF32, spec.batch * spec.heads * spec.seq_len));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchAttentionForward(DimsOf(spec), F(q), F(k), F(v), F(out), F(lse), stream_),
               "AttentionForward kernel launch");
}

absl::Status CudaCompute::AttentionBackward(const AttentionSpec& spec, const TensorView& dout,
                                            const TensorView& q, const TensorView& k,
                                            const TensorView& v, const TensorView& out,
                                            const TensorView& lse, TensorView dq, TensorView dk,
                                            TensorView dv) {
  constexpr const char* kKernel = "AttentionBackward";
  TITAN_RETURN_IF_ERROR(CheckAttention(kKernel, spec, q, k, v));
  const std::pair<const char*, const TensorView*> like_q[] = {
      {"dout", &dout}, {"out", &out}, {"dq", &dq}};
  for (const auto& [name, x] : like_q)
    TITAN_RETURN_IF_ERROR(Expect(kKernel, name, *x, DType::kF32, q.numel()));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "dk", dk, DType::kF32, k.numel()));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "dv", dv, DType::kF32, v.numel()));
  const int64_t rows = spec.batch * spec.heads * spec.seq_len;
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "lse", lse, DType::kF32, rows));
  TITAN_RETURN_IF_ERROR(Ready());
  TITAN_ASSIGN_OR_RETURN(StreamScratch row_dots, Scratch(static_cast<size_t>(rows) * sizeof(float),
                                                         "AttentionBackward rowsum(dout * out)"));
  return Check(LaunchAttentionBackward(DimsOf(spec), F(dout), F(q), F(k), F(v), F(out), F(lse),
                                       F(dq), F(dk), F(dv), row_dots.as<float>(), stream_),
               "AttentionBackward kernel launch");
}

absl::Status CudaCompute::AttentionMerge(const AttentionSpec& spec, const TensorView& part_out,
                                         const TensorView& part_lse, TensorView out,
                                         TensorView lse) {
  constexpr const char* kKernel = "AttentionMerge";
  const int64_t rows = spec.batch * spec.seq_len * spec.heads, hd = spec.head_dim;
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "part_out", part_out, DType::kF32, rows * hd));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "out", out, DType::kF32, rows * hd));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "part_lse", part_lse, DType::kF32, rows));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "lse", lse, DType::kF32, rows));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(
      LaunchAttentionMerge(DimsOf(spec), F(part_out), F(part_lse), F(out), F(lse), stream_),
      "AttentionMerge kernel launch");
}

}  // namespace titan::cuda
