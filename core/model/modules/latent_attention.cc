#include "core/model/modules/latent_attention.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace titan {

namespace {
using R = ModuleContext;

// DeepSeek-V3's rotary frequencies over `dim` features (TorchTitan's _yarn_inv_freq with
// truncated cutoffs), in f32 as PyTorch computes them.
std::vector<float> RotaryFrequencies(int64_t dim, double theta, const YarnConfig& yarn) {
  std::vector<float> freqs(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    freqs[i] = 1.0f / static_cast<float>(std::pow(static_cast<float>(theta), exponent));
  }
  if (!yarn.enabled()) return freqs;
  auto correction_dim = [&](double rotations) {
    return dim * std::log(yarn.original_seq_len / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(theta));
  };
  double low = std::max(std::floor(correction_dim(yarn.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(yarn.beta_slow)), static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  const float factor = static_cast<float>(yarn.factor);
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float ramp = std::clamp(
        (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f,
        1.0f);
    freqs[i] = freqs[i] / factor * ramp + freqs[i] * (1.0f - ramp);
  }
  return freqs;
}

}  // namespace

LatentAttention::LatentAttention(ModuleContext& context, const LatentAttentionWeights& w)
    : ctx_(context),
      wq_(context, w.wq),
      wq_a_(context, w.wq_a),
      wq_b_(context, w.wq_b),
      wkv_a_(context, w.wkv_a),
      wkv_b_(context, w.wkv_b),
      wo_(context, w.wo),
      q_norm_(context, w.q_norm),
      kv_norm_(context, w.kv_norm) {}

int64_t LatentAttention::ScratchWidth(const LlamaConfig& c) {
  const LatentAttentionConfig& a = c.mla;
  return std::max({c.n_heads * std::max(a.qk_head_dim(), a.qk_nope_head_dim + a.v_head_dim),
                   a.kv_lora_rank + a.qk_rope_head_dim, a.q_lora_rank});
}

absl::Status LatentAttention::RopeTable(const LlamaConfig& c, Compute& compute,
                                        int64_t position_offset, const TensorView& cos,
                                        const TensorView& sin) {
  const LatentAttentionConfig& a = c.mla;
  const int64_t half = a.qk_head_dim() / 2, unrotated = a.qk_nope_head_dim / 2;
  const int64_t len = cos.shape[0];
  const std::vector<float> freqs = RotaryFrequencies(a.qk_rope_head_dim, c.rope.theta, c.yarn);
  std::vector<float> cos_host(len * half, 1.0f), sin_host(len * half, 0.0f);
  for (int64_t p = 0; p < len; ++p) {
    for (int64_t i = 0; i < static_cast<int64_t>(freqs.size()); ++i) {
      const float angle = static_cast<float>(p + position_offset) * freqs[i];
      cos_host[p * half + unrotated + i] = std::cos(angle);
      sin_host[p * half + unrotated + i] = std::sin(angle);
    }
  }
  TITAN_RETURN_IF_ERROR(compute.CopyFromHost(cos_host.data(), cos));
  return compute.CopyFromHost(sin_host.data(), sin);
}

void LatentAttention::ListActivations(AttentionActs& acts,
                                      std::vector<ActivationSlot>& slots) const {
  const LlamaConfig& c = ctx_.config;
  const LatentAttentionConfig& a = c.mla;
  const int64_t n = ctx_.n, h = c.n_heads, hd = a.qk_head_dim();
  const int64_t lse = ctx_.batch * h * ctx_.seq_len;
  LatentActs& l = acts.latent;
  const BlockStage qkv = BlockStage::kQkv;
  if (low_rank_q()) {
    slots.push_back({&l.q_a, "q_a", {n * a.q_lora_rank}, DType::kF32, qkv});
    slots.push_back({&l.rstd_q, "rstd_q", {n}, DType::kF32, qkv});
    slots.push_back({&l.q_normed, "q_normed", {n * a.q_lora_rank}, DType::kF32, qkv});
  }
  slots.push_back({&l.c_kv, "c_kv", {n * a.kv_lora_rank}, DType::kF32, qkv});
  slots.push_back({&l.rstd_kv, "rstd_kv", {n}, DType::kF32, qkv});
  slots.push_back({&l.kv_normed, "kv_normed", {n * a.kv_lora_rank}, DType::kF32, qkv});
  slots.push_back({&acts.q, "q", {n * h * hd}, DType::kF32, qkv});
  slots.push_back({&acts.k, "k", {n * h * hd}, DType::kF32, qkv});
  slots.push_back({&acts.v, "v", {n * h * hd}, DType::kF32, qkv});
  slots.push_back({&acts.att, "att", {n * h * hd}, DType::kF32, BlockStage::kAttention});
  slots.push_back({&acts.lse, "lse", {lse}, DType::kF32, BlockStage::kAttention});
  slots.push_back({&l.att_v, "att_v", {n * h * a.v_head_dim}, DType::kF32, BlockStage::kAttention});
}

void LatentAttention::ListProjections(const char* normed, BlockStage norm_stage,
                                      std::vector<ProjectionInput>& projections) const {
  const LlamaConfig& c = ctx_.config;
  const LatentAttentionConfig& a = c.mla;
  const int64_t d = c.dim, h = c.n_heads, q = h * a.qk_head_dim();
  const DType dtype = ctx_.matmul_dtype;
  const BlockStage qkv = BlockStage::kQkv;
  if (low_rank_q()) {
    projections.push_back({wq_a_.weight(), a.q_lora_rank, d, normed, norm_stage, dtype});
    projections.push_back({wq_b_.weight(), q, a.q_lora_rank, "q_normed", qkv, DType::kF32});
  } else {
    projections.push_back({wq_.weight(), q, d, normed, norm_stage, dtype});
  }
  projections.push_back(
      {wkv_a_.weight(), a.kv_lora_rank + a.qk_rope_head_dim, d, normed, norm_stage, dtype});
  projections.push_back({wkv_b_.weight(), h * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank,
                         "kv_normed", qkv, DType::kF32});
  projections.push_back(
      {wo_.weight(), d, h * a.v_head_dim, "att_v", BlockStage::kAttention, DType::kF32});
}

std::vector<int> LatentAttention::weights() const {
  if (low_rank_q()) {
    return {wq_a_.weight(), wq_b_.weight(), wkv_a_.weight(), wkv_b_.weight(), wo_.weight()};
  }
  return {wq_.weight(), wkv_a_.weight(), wkv_b_.weight(), wo_.weight()};
}

std::vector<int> LatentAttention::norm_weights() const {
  if (low_rank_q()) return {q_norm_.weight(), kv_norm_.weight()};
  return {kv_norm_.weight()};
}

AttentionSpec LatentAttention::Spec() const {
  AttentionSpec spec;
  spec.batch = ctx_.batch, spec.seq_len = ctx_.seq_len, spec.kv_len = ctx_.seq_len;
  spec.heads = spec.kv_heads = ctx_.config.n_heads;
  spec.head_dim = ctx_.config.mla.qk_head_dim();
  spec.matmul_dtype = ctx_.matmul_dtype;
  return spec;
}

TensorView LatentAttention::Matrix(const TensorView& base, int64_t offset, int64_t rows,
                                   int64_t columns) const {
  return ctx_.F32(base.data_as<float>() + offset, {rows, columns});
}

absl::Status LatentAttention::Transpose(const TensorView& src, int64_t rows, int64_t columns,
                                        const TensorView& dst) {
  return ctx_.compute.Transpose(Matrix(src, 0, rows, columns), Matrix(dst, 0, columns, rows));
}

absl::Status LatentAttention::Project(const TensorView& x, const AttentionActs& acts) {
  const LlamaConfig& c = ctx_.config;
  const LatentAttentionConfig& a = c.mla;
  const LatentActs& l = acts.latent;
  const SharedScratch& s = ctx_.scratch;
  const int64_t n = ctx_.n, h = c.n_heads, nh = n * h, hd = a.qk_head_dim();
  const int64_t dn = a.qk_nope_head_dim, dr = a.qk_rope_head_dim, dv = a.v_head_dim;
  const int64_t kvl = a.kv_lora_rank, ql = a.q_lora_rank;
  // Queries, rotated and scaled by the softmax's factor over 1 / sqrt(hd).
  const TensorView q = R::Reshaped(acts.q, {n, h * hd});
  if (low_rank_q()) {
    TITAN_RETURN_IF_ERROR(wq_a_.Forward(x, R::Reshaped(l.q_a, {n, ql})));
    TITAN_RETURN_IF_ERROR(
        q_norm_.Forward(R::Reshaped(l.q_a, {n, ql}), R::Reshaped(l.q_normed, {n, ql}), l.rstd_q));
    TITAN_ASSIGN_OR_RETURN(TensorView q_normed,
                           ctx_.Operand(R::Reshaped(l.q_normed, {n, ql}), OperandScratch::kInput));
    TITAN_RETURN_IF_ERROR(wq_b_.Forward(q_normed, q));
  } else {
    TITAN_RETURN_IF_ERROR(wq_.Forward(x, q));
  }
  const TensorView& cos = s.rope_cos;
  const TensorView& sin = s.rope_sin;
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.RopeForward(cos, sin, R::Reshaped(acts.q, {ctx_.batch, ctx_.seq_len, h, hd})));
  if (const double factor = c.SoftmaxScaleFactor(); factor != 1.0) {
    TITAN_RETURN_IF_ERROR(
        ctx_.compute.Scale(R::Reshaped(acts.q, {nh * hd}), static_cast<float>(factor)));
  }
  // [c_kv | k_pe] = wkv_a x, split by a transpose: latent_b holds [c_kv | k_pe]^T.
  TITAN_RETURN_IF_ERROR(wkv_a_.Forward(x, Matrix(s.latent_a, 0, n, kvl + dr)));
  TITAN_RETURN_IF_ERROR(Transpose(s.latent_a, n, kvl + dr, s.latent_b));
  TITAN_RETURN_IF_ERROR(Transpose(s.latent_b, kvl, n, l.c_kv));
  const TensorView k_pe_t = Matrix(s.latent_b, kvl * n, dr * n, 1);  // [dr, n] as a column
  TITAN_RETURN_IF_ERROR(kv_norm_.Forward(R::Reshaped(l.c_kv, {n, kvl}),
                                         R::Reshaped(l.kv_normed, {n, kvl}), l.rstd_kv));
  // Per head [k_nope | v] = wkv_b kv_norm(c_kv); latent_c holds it transposed [dn + dv, n h].
  TITAN_ASSIGN_OR_RETURN(TensorView kv_normed,
                         ctx_.Operand(R::Reshaped(l.kv_normed, {n, kvl}), OperandScratch::kInput));
  TITAN_RETURN_IF_ERROR(wkv_b_.Forward(kv_normed, Matrix(s.latent_a, 0, n, h * (dn + dv))));
  TITAN_RETURN_IF_ERROR(Transpose(s.latent_a, nh, dn + dv, s.latent_c));
  // Keys transposed [hd, n h] in latent_a: k_nope's rows, then k_pe broadcast to every head
  // (k_pe^T as a column times a row of ones); rotated once transposed back.
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.Copy(Matrix(s.latent_c, 0, dn, nh), Matrix(s.latent_a, 0, dn, nh)));
  const TensorView ones = Matrix(s.latent_ones, 0, 1, h);
  TITAN_RETURN_IF_ERROR(ctx_.compute.Fill(ones, 1.0f));
  TITAN_RETURN_IF_ERROR(ctx_.compute.Gemm(k_pe_t, false, ones, false, 1.0f, 0.0f,
                                          Matrix(s.latent_a, dn * nh, dr * n, h)));
  TITAN_RETURN_IF_ERROR(Transpose(s.latent_a, hd, nh, acts.k));
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.RopeForward(cos, sin, R::Reshaped(acts.k, {ctx_.batch, ctx_.seq_len, h, hd})));
  // Values padded with zero columns to hd: [v^T; 0] [hd, n h] in latent_a, transposed back.
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.Copy(Matrix(s.latent_c, dn * nh, dv, nh), Matrix(s.latent_a, 0, dv, nh)));
  if (dv < hd) TITAN_RETURN_IF_ERROR(ctx_.Zero(Matrix(s.latent_a, dv * nh, hd - dv, nh)));
  return Transpose(s.latent_a, hd, nh, acts.v);
}

absl::Status LatentAttention::Attend(const AttentionActs& acts) {
  TITAN_RETURN_IF_ERROR(
      ctx_.attention->Forward(Spec(), acts.q, acts.k, acts.v, acts.att, acts.lse));
  // The output without its padded (zero) columns: wo's input [n h, dv].
  const LatentAttentionConfig& a = ctx_.config.mla;
  const int64_t nh = ctx_.n * ctx_.config.n_heads, hd = a.qk_head_dim(), dv = a.v_head_dim;
  const TensorView& t = ctx_.scratch.latent_a;
  TITAN_RETURN_IF_ERROR(Transpose(acts.att, nh, hd, t));
  return Transpose(t, dv, nh, acts.latent.att_v);
}

absl::Status LatentAttention::AddOutput(const AttentionActs& acts, const TensorView& out) {
  const int64_t width = ctx_.config.n_heads * ctx_.config.mla.v_head_dim;
  TITAN_ASSIGN_OR_RETURN(
      TensorView att,
      ctx_.Operand(R::Reshaped(acts.latent.att_v, {ctx_.n, width}), OperandScratch::kInput));
  return wo_.AddRowParallel(att, out);
}

absl::Status LatentAttention::Backward(const TensorView& d_out, const TensorView& x,
                                       const AttentionActs& acts, const TensorView& dx) {
  const LlamaConfig& c = ctx_.config;
  const LatentAttentionConfig& a = c.mla;
  const LatentActs& l = acts.latent;
  const SharedScratch& s = ctx_.scratch;
  const int64_t n = ctx_.n, h = c.n_heads, nh = n * h, hd = a.qk_head_dim();
  const int64_t dn = a.qk_nope_head_dim, dr = a.qk_rope_head_dim, dv = a.v_head_dim;
  const int64_t kvl = a.kv_lora_rank, ql = a.q_lora_rank;
  // wo, then the output's gradient padded with zero columns to hd (through latent_b).
  const TensorView d_att_v = Matrix(s.latent_a, 0, n, h * dv);
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_att_v));
  TITAN_RETURN_IF_ERROR(wo_.Backward(d_out, R::Reshaped(l.att_v, {n, h * dv}), d_att_v));
  TITAN_RETURN_IF_ERROR(Transpose(s.latent_a, nh, dv, s.latent_b));
  if (dv < hd) TITAN_RETURN_IF_ERROR(ctx_.Zero(Matrix(s.latent_b, dv * nh, hd - dv, nh)));
  const TensorView d_att = R::Reshaped(s.d_att, {nh * hd});
  TITAN_RETURN_IF_ERROR(Transpose(s.latent_b, hd, nh, d_att));
  const TensorView d_q = R::Reshaped(s.d_q, {nh * hd}), d_k = R::Reshaped(s.d_k, {nh * hd});
  const TensorView d_v = R::Reshaped(s.d_v, {nh * hd});
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_q));
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_k));
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_v));
  TITAN_RETURN_IF_ERROR(ctx_.attention->Backward(Spec(), d_att, acts.q, acts.k, acts.v, acts.att,
                                                 acts.lse, d_q, d_k, d_v));
  const TensorView& cos = s.rope_cos;
  const TensorView& sin = s.rope_sin;
  const std::vector<int64_t> heads = {ctx_.batch, ctx_.seq_len, h, hd};
  // Queries: back through the scale and the rotation into the projections.
  if (const double factor = c.SoftmaxScaleFactor(); factor != 1.0) {
    TITAN_RETURN_IF_ERROR(ctx_.compute.Scale(d_q, static_cast<float>(factor)));
  }
  TITAN_RETURN_IF_ERROR(ctx_.compute.RopeBackward(cos, sin, R::Reshaped(d_q, heads)));
  TITAN_RETURN_IF_ERROR(ctx_.Zero(dx));
  const TensorView d_q_rows = R::Reshaped(d_q, {n, h * hd});
  if (low_rank_q()) {
    const TensorView d_q_normed = Matrix(s.latent_a, 0, n, ql);
    const TensorView d_q_a = Matrix(s.latent_b, 0, n, ql);
    TITAN_RETURN_IF_ERROR(ctx_.Zero(d_q_normed));
    TITAN_RETURN_IF_ERROR(wq_b_.Backward(d_q_rows, R::Reshaped(l.q_normed, {n, ql}), d_q_normed));
    TITAN_RETURN_IF_ERROR(ctx_.Zero(d_q_a));
    TITAN_RETURN_IF_ERROR(
        q_norm_.Backward(d_q_normed, R::Reshaped(l.q_a, {n, ql}), l.rstd_q, d_q_a));
    TITAN_RETURN_IF_ERROR(wq_a_.Backward(d_q_a, x, dx));
  } else {
    TITAN_RETURN_IF_ERROR(wq_.Backward(d_q_rows, x, dx));
  }
  // Keys and values: d_k rotated back and transposed [hd, n h] in latent_a, d_v in latent_b;
  // wkv_b's output gradient [d_k_nope | d_v] per head joined transposed in latent_c, then
  // transposed into latent_b.
  TITAN_RETURN_IF_ERROR(ctx_.compute.RopeBackward(cos, sin, R::Reshaped(d_k, heads)));
  TITAN_RETURN_IF_ERROR(Transpose(d_k, nh, hd, s.latent_a));
  TITAN_RETURN_IF_ERROR(Transpose(d_v, nh, hd, s.latent_b));
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.Copy(Matrix(s.latent_a, 0, dn, nh), Matrix(s.latent_c, 0, dn, nh)));
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.Copy(Matrix(s.latent_b, 0, dv, nh), Matrix(s.latent_c, dn * nh, dv, nh)));
  TITAN_RETURN_IF_ERROR(Transpose(s.latent_c, dn + dv, nh, s.latent_b));
  // wkv_a's output gradient transposed [kvl + dr, n] in latent_c: the rotary key's rows are its
  // every head's gradients summed (times a column of ones).
  const TensorView ones = Matrix(s.latent_ones, 0, h, 1);
  TITAN_RETURN_IF_ERROR(ctx_.compute.Fill(ones, 1.0f));
  TITAN_RETURN_IF_ERROR(ctx_.compute.Gemm(Matrix(s.latent_a, dn * nh, dr * n, h), false, ones,
                                          false, 1.0f, 0.0f,
                                          Matrix(s.latent_c, kvl * n, dr * n, 1)));
  const TensorView d_kv_normed = Matrix(s.latent_a, 0, n, kvl);
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_kv_normed));
  TITAN_RETURN_IF_ERROR(wkv_b_.Backward(Matrix(s.latent_b, 0, n, h * (dn + dv)),
                                        R::Reshaped(l.kv_normed, {n, kvl}), d_kv_normed));
  const TensorView d_c_kv = Matrix(s.latent_b, 0, n, kvl);
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_c_kv));
  TITAN_RETURN_IF_ERROR(
      kv_norm_.Backward(d_kv_normed, R::Reshaped(l.c_kv, {n, kvl}), l.rstd_kv, d_c_kv));
  TITAN_RETURN_IF_ERROR(Transpose(s.latent_b, n, kvl, s.latent_c));
  TITAN_RETURN_IF_ERROR(Transpose(s.latent_c, kvl + dr, n, s.latent_a));
  return wkv_a_.Backward(Matrix(s.latent_a, 0, n, kvl + dr), x, dx);
}

}  // namespace titan
