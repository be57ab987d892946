// Attention of the CUDA compute: the kernels' own head_dim limit, on top of the kernel table's
// operand checks (which have run), then attention_kernels.cu.
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

absl::Status CheckHeadDim(const char* kernel, const AttentionSpec& s) {
  if (s.head_dim > kMaxAttentionHeadDim) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": head_dim ", s.head_dim,
                                                   " exceeds the cuda kernel's limit of ",
                                                   kMaxAttentionHeadDim));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CudaCompute::RunAttentionForward(const AttentionSpec& spec, const TensorView& q,
                                              const TensorView& k, const TensorView& v,
                                              TensorView out, TensorView lse) {
  TITAN_RETURN_IF_ERROR(CheckHeadDim("AttentionForward", spec));
  TITAN_RETURN_IF_ERROR(Ready());
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
