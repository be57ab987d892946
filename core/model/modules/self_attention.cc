#include "core/model/modules/self_attention.h"

namespace titan {

namespace {
using R = ModuleContext;
}  // namespace

void SelfAttention::ListActivations(AttentionActs& acts, std::vector<ActivationSlot>& slots) const {
  const LocalSizes local = ctx_.local();
  const int64_t n = ctx_.n, hd = ctx_.config.head_dim();
  const int64_t qd = local.heads * hd, kvd = local.kv_heads * hd;
  const int64_t lse = ctx_.batch * local.heads * ctx_.seq_len;
  slots.push_back({&acts.q, "q", {n * qd}, DType::kF32, BlockStage::kQkv});
  slots.push_back({&acts.k, "k", {n * kvd}, DType::kF32, BlockStage::kQkv});
  slots.push_back({&acts.v, "v", {n * kvd}, DType::kF32, BlockStage::kQkv});
  slots.push_back({&acts.att, "att", {n * qd}, DType::kF32, BlockStage::kAttention});
  slots.push_back({&acts.lse, "lse", {lse}, DType::kF32, BlockStage::kAttention});
}

void SelfAttention::ListProjections(const char* normed, BlockStage norm_stage,
                                    std::vector<ProjectionInput>& projections) const {
  const LocalSizes local = ctx_.local();
  const int64_t d = ctx_.config.dim, hd = ctx_.config.head_dim();
  const int64_t qd = local.heads * hd, kvd = local.kv_heads * hd;
  const DType dtype = ctx_.matmul_dtype;
  projections.push_back({wq_.weight(), qd, d, normed, norm_stage, dtype});
  projections.push_back({wk_.weight(), kvd, d, normed, norm_stage, dtype});
  projections.push_back({wv_.weight(), kvd, d, normed, norm_stage, dtype});
  projections.push_back({wo_.weight(), d, qd, "att", BlockStage::kAttention, DType::kF32});
}

AttentionSpec SelfAttention::Spec() const {
  const LocalSizes local = ctx_.local();
  AttentionSpec spec;
  spec.batch = ctx_.batch, spec.seq_len = ctx_.seq_len, spec.kv_len = ctx_.seq_len;
  spec.heads = local.heads, spec.kv_heads = local.kv_heads, spec.head_dim = ctx_.config.head_dim();
  return spec;
}

absl::Status SelfAttention::Project(const TensorView& x, const AttentionActs& acts) {
  const LocalSizes local = ctx_.local();
  const int64_t n = ctx_.n, b = ctx_.batch, t = ctx_.seq_len, hd = ctx_.config.head_dim();
  const int64_t qd = local.heads * hd, kvd = local.kv_heads * hd;
  TITAN_RETURN_IF_ERROR(wq_.Forward(x, R::Reshaped(acts.q, {n, qd})));
  TITAN_RETURN_IF_ERROR(wk_.Forward(x, R::Reshaped(acts.k, {n, kvd})));
  TITAN_RETURN_IF_ERROR(wv_.Forward(x, R::Reshaped(acts.v, {n, kvd})));
  const TensorView& cos = ctx_.scratch.rope_cos;
  const TensorView& sin = ctx_.scratch.rope_sin;
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.RopeForward(cos, sin, R::Reshaped(acts.q, {b, t, local.heads, hd})));
  return ctx_.compute.RopeForward(cos, sin, R::Reshaped(acts.k, {b, t, local.kv_heads, hd}));
}

absl::Status SelfAttention::Attend(const AttentionActs& acts) {
  return ctx_.attention->Forward(Spec(), acts.q, acts.k, acts.v, acts.att, acts.lse);
}

absl::Status SelfAttention::AddOutput(const AttentionActs& acts, const TensorView& out) {
  const int64_t qd = ctx_.local().heads * ctx_.config.head_dim();
  TITAN_ASSIGN_OR_RETURN(TensorView att,
                         ctx_.Operand(R::Reshaped(acts.att, {ctx_.n, qd}), OperandScratch::kInput));
  return wo_.AddRowParallel(att, out);
}

absl::Status SelfAttention::Backward(const TensorView& d_out, const TensorView& x,
                                     const AttentionActs& acts, const TensorView& dx) {
  const LocalSizes local = ctx_.local();
  const int64_t n = ctx_.n, b = ctx_.batch, t = ctx_.seq_len, hd = ctx_.config.head_dim();
  const int64_t qd = local.heads * hd, kvd = local.kv_heads * hd;
  const SharedScratch& s = ctx_.scratch;
  const TensorView d_att = R::Reshaped(s.d_att, {n, qd});
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_att));
  TITAN_RETURN_IF_ERROR(wo_.Backward(d_out, R::Reshaped(acts.att, {n, qd}), d_att));
  const TensorView d_q = R::Reshaped(s.d_q, {n * qd}), d_k = R::Reshaped(s.d_k, {n * kvd});
  const TensorView d_v = R::Reshaped(s.d_v, {n * kvd});
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_q));
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_k));
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_v));
  TITAN_RETURN_IF_ERROR(ctx_.attention->Backward(Spec(), R::Reshaped(d_att, {n * qd}), acts.q,
                                                 acts.k, acts.v, acts.att, acts.lse, d_q, d_k,
                                                 d_v));
  const TensorView& cos = ctx_.scratch.rope_cos;
  const TensorView& sin = ctx_.scratch.rope_sin;
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.RopeBackward(cos, sin, R::Reshaped(d_q, {b, t, local.heads, hd})));
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.RopeBackward(cos, sin, R::Reshaped(d_k, {b, t, local.kv_heads, hd})));
  TITAN_RETURN_IF_ERROR(ctx_.Zero(dx));
  TITAN_RETURN_IF_ERROR(wq_.Backward(R::Reshaped(d_q, {n, qd}), x, dx));
  TITAN_RETURN_IF_ERROR(wk_.Backward(R::Reshaped(d_k, {n, kvd}), x, dx));
  return wv_.Backward(R::Reshaped(d_v, {n, kvd}), x, dx);
}

}  // namespace titan
