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
  if (qk_norm()) {
    slots.push_back({&acts.q_raw, "q_raw", {n * qd}, DType::kF32, BlockStage::kQkv});
    slots.push_back({&acts.k_raw, "k_raw", {n * kvd}, DType::kF32, BlockStage::kQkv});
    slots.push_back({&acts.rstd_q, "rstd_q", {n * local.heads}, DType::kF32, BlockStage::kQkv});
    slots.push_back({&acts.rstd_k, "rstd_k", {n * local.kv_heads}, DType::kF32, BlockStage::kQkv});
  }
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
  spec.matmul_dtype = ctx_.matmul_dtype;
  return spec;
}

absl::Status SelfAttention::Project(const TensorView& x, const AttentionActs& acts) {
  const LocalSizes local = ctx_.local();
  const int64_t n = ctx_.n, b = ctx_.batch, t = ctx_.seq_len, hd = ctx_.config.head_dim();
  const int64_t qd = local.heads * hd, kvd = local.kv_heads * hd;
  const bool norm = qk_norm();
  TITAN_RETURN_IF_ERROR(wq_.Forward(x, R::Reshaped(norm ? acts.q_raw : acts.q, {n, qd})));
  TITAN_RETURN_IF_ERROR(wk_.Forward(x, R::Reshaped(norm ? acts.k_raw : acts.k, {n, kvd})));
  TITAN_RETURN_IF_ERROR(wv_.Forward(x, R::Reshaped(acts.v, {n, kvd})));
  if (norm) {
    const int64_t qrows = n * local.heads, krows = n * local.kv_heads;
    TITAN_RETURN_IF_ERROR(q_norm_.Forward(R::Reshaped(acts.q_raw, {qrows, hd}),
                                          R::Reshaped(acts.q, {qrows, hd}),
                                          R::Reshaped(acts.rstd_q, {qrows})));
    TITAN_RETURN_IF_ERROR(k_norm_.Forward(R::Reshaped(acts.k_raw, {krows, hd}),
                                          R::Reshaped(acts.k, {krows, hd}),
                                          R::Reshaped(acts.rstd_k, {krows})));
  }
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
  // Through QK-norm into the projections' outputs: the queries' gradient into d_att (free once
  // the attention's backward has read it), the keys' into d_q (free once that has).
  TensorView dq_raw = d_q, dk_raw = d_k;
  if (qk_norm()) {
    const int64_t qrows = n * local.heads, krows = n * local.kv_heads;
    dq_raw = R::Reshaped(s.d_att, {n * qd});
    dk_raw = R::Reshaped(s.d_q, {n * kvd});
    TITAN_RETURN_IF_ERROR(ctx_.Zero(dq_raw));
    TITAN_RETURN_IF_ERROR(
        q_norm_.Backward(R::Reshaped(d_q, {qrows, hd}), R::Reshaped(acts.q_raw, {qrows, hd}),
                         R::Reshaped(acts.rstd_q, {qrows}), R::Reshaped(dq_raw, {qrows, hd})));
    TITAN_RETURN_IF_ERROR(ctx_.Zero(dk_raw));
    TITAN_RETURN_IF_ERROR(
        k_norm_.Backward(R::Reshaped(d_k, {krows, hd}), R::Reshaped(acts.k_raw, {krows, hd}),
                         R::Reshaped(acts.rstd_k, {krows}), R::Reshaped(dk_raw, {krows, hd})));
  }
  TITAN_RETURN_IF_ERROR(ctx_.Zero(dx));
  TITAN_RETURN_IF_ERROR(wq_.Backward(R::Reshaped(dq_raw, {n, qd}), x, dx));
  TITAN_RETURN_IF_ERROR(wk_.Backward(R::Reshaped(dk_raw, {n, kvd}), x, dx));
  return wv_.Backward(R::Reshaped(d_v, {n, kvd}), x, dx, /*scatter_dinp=*/true);
}

}  // namespace titan
