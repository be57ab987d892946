// The model's side of context parallelism: each cp rank holds chunks r and 2 cp - 1 - r of the
// 2 cp equal chunks of every sequence (causal load balancing: a rank's early chunk sees few keys,
// its mirror many, and every rank sees the same number), with RoPE at their global positions.
// Everything but attention works token by token on the local chunks. Attention all-gathers the
// keys and values of the whole sequence (cheap under GQA: kv heads are few) and runs each local
// chunk of queries against them at its global offset; the backward reduce-scatters the keys' and
// values' gradients back to the ranks that hold them. The ring (llama_context_ring.cc) passes
// them around instead.
#include "absl/strings/str_cat.h"
#include "core/model/llama.h"

namespace titan {

absl::Status LlamaModel::SetContextParallel(const ContextParallelLayout& layout) {
  cp_ = layout.group != nullptr && layout.group->size() > 1 ? layout.group : nullptr;
  cp_rotate_ = layout.rotate;
  batch_ = seq_len_ = 0;  // the activations' sizes change with the degree
  tokens_valid_ = false;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> LlamaModel::LocalChunks(const int32_t* whole, int64_t batch,
                                                             int64_t seq_len) const {
  const int64_t cp = context_parallel_degree();
  if (seq_len % (2 * cp) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model input: context parallel over ", cp, " ranks splits each sequence into ", 2 * cp,
        " chunks (two per rank, for causal load balancing), so seq_len must be divisible by ",
        2 * cp, ", found ", seq_len));
  }
  const int64_t c = seq_len / (2 * cp), r = cp_->rank();
  std::vector<int32_t> local;
  local.reserve(static_cast<size_t>(batch * 2 * c));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t chunk : {r, 2 * cp - 1 - r}) {
      const int32_t* from = whole + b * seq_len + chunk * c;
      local.insert(local.end(), from, from + c);
    }
  }
  return local;
}

int64_t LlamaModel::ChunkStart(int half) const {
  const int64_t cp = context_parallel_degree(), r = cp_ == nullptr ? 0 : cp_->rank();
  const int64_t c = seq_len_ / 2;
  return (half == 0 ? r : 2 * cp - 1 - r) * c;
}

absl::StatusOr<float> LlamaModel::AverageOverContext(float loss) const {
  if (cp_ == nullptr) return loss;
  TITAN_RETURN_IF_ERROR(cp_->AllReduce(FlatF32(&loss, 1), ReduceOp::kAvg));
  return loss;
}

absl::Status LlamaModel::CopyRows(const float* src, int64_t src_rows, int64_t src_first, float* dst,
                                  int64_t dst_rows, int64_t dst_first, int64_t rows, int64_t width,
                                  int64_t batches, bool add) const {
  for (int64_t b = 0; b < batches; ++b) {
    const TensorView from = View(src + (b * src_rows + src_first) * width, {rows * width});
    const TensorView to = View(dst + (b * dst_rows + dst_first) * width, {rows * width});
    TITAN_RETURN_IF_ERROR(add ? compute_->Accumulate(from, to) : compute_->Copy(from, to));
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::GatherSequence(const float* local, float* full, int64_t width) {
  const int64_t cp = context_parallel_degree(), tl = seq_len_, c = tl / 2, t = tl * cp;
  const int64_t block = batch_ * tl * width;
  TITAN_RETURN_IF_ERROR(cp_->AllGather(View(local, {block}), View(kv_ranks_, {cp * block})));
  for (int64_t q = 0; q < cp; ++q) {
    for (int half = 0; half < 2; ++half) {
      const int64_t chunk = half == 0 ? q : 2 * cp - 1 - q;
      TITAN_RETURN_IF_ERROR(CopyRows(kv_ranks_ + q * block, tl, half * c, full, t, chunk * c, c,
                                     width, batch_, /*add=*/false));
    }
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::ReduceScatterSequence(const float* full, float* local, int64_t width) {
  const int64_t cp = context_parallel_degree(), tl = seq_len_, c = tl / 2, t = tl * cp;
  const int64_t block = batch_ * tl * width;
  for (int64_t q = 0; q < cp; ++q) {
    for (int half = 0; half < 2; ++half) {
      const int64_t chunk = half == 0 ? q : 2 * cp - 1 - q;
      TITAN_RETURN_IF_ERROR(CopyRows(full, t, chunk * c, kv_ranks_ + q * block, tl, half * c, c,
                                     width, batch_, /*add=*/false));
    }
  }
  TITAN_RETURN_IF_ERROR(
      cp_->ReduceScatter(View(kv_ranks_, {cp * block}), View(kv_local_, {block}), ReduceOp::kSum));
  return compute_->Accumulate(View(kv_local_, {block}), View(local, {block}));
}

absl::Status LlamaModel::Attend(const AttentionSpec& spec, const float* q, const float* k,
                                const float* v, float* att, float* lse) {
  const int64_t b = spec.batch, tl = spec.seq_len, h = spec.heads, hd = spec.head_dim;
  const int64_t qd = h * hd, kvd = spec.kv_heads * hd;
  if (cp_ == nullptr) {
    attention_pairs_ += b * h * tl * (tl + 1) / 2;
    return compute_->AttentionForward(spec, View(q, {b * tl * qd}), View(k, {b * tl * kvd}),
                                      View(v, {b * tl * kvd}), View(att, {b * tl * qd}),
                                      View(lse, {b * h * tl}));
  }
  if (cp_rotate_ == ContextParallelRotate::kRing) return AttendRing(spec, q, k, v, att, lse);
  const int64_t c = tl / 2, t = tl * context_parallel_degree();
  TITAN_RETURN_IF_ERROR(GatherSequence(k, kv_full_, kvd));
  TITAN_RETURN_IF_ERROR(GatherSequence(v, kv_full2_, kvd));
  for (int half = 0; half < 2; ++half) {
    AttentionSpec chunk = spec;
    chunk.seq_len = c, chunk.kv_len = t, chunk.q_offset = ChunkStart(half), chunk.kv_offset = 0;
    // The work done, counted as the query-key pairs the causal mask leaves: query i of the
    // chunk sees the keys up to its global position.
    for (int64_t i = 0; i < c; ++i) attention_pairs_ += b * h * (chunk.q_offset + i + 1);
    TITAN_RETURN_IF_ERROR(CopyRows(q, tl, half * c, q_chunk_, c, 0, c, qd, b, false));
    TITAN_RETURN_IF_ERROR(
        compute_->AttentionForward(chunk, View(q_chunk_, {b * c * qd}),
                                   View(kv_full_, {b * t * kvd}), View(kv_full2_, {b * t * kvd}),
                                   View(att_chunk_, {b * c * qd}), View(lse_chunk_, {b * h * c})));
    TITAN_RETURN_IF_ERROR(CopyRows(att_chunk_, c, 0, att, tl, half * c, c, qd, b, false));
    // lse is [batch, heads, seq_len]: batch x heads rows of one value per token.
    TITAN_RETURN_IF_ERROR(CopyRows(lse_chunk_, c, 0, lse, tl, half * c, c, 1, b * h, false));
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::AttendBackward(const AttentionSpec& spec, const float* d_att,
                                        const float* q, const float* k, const float* v,
                                        const float* att, const float* lse, float* dq, float* dk,
                                        float* dv) {
  const int64_t b = spec.batch, tl = spec.seq_len, h = spec.heads, hd = spec.head_dim;
  const int64_t qd = h * hd, kvd = spec.kv_heads * hd;
  if (cp_ == nullptr) {
    return compute_->AttentionBackward(
        spec, View(d_att, {b * tl * qd}), View(q, {b * tl * qd}), View(k, {b * tl * kvd}),
        View(v, {b * tl * kvd}), View(att, {b * tl * qd}), View(lse, {b * h * tl}),
        View(dq, {b * tl * qd}), View(dk, {b * tl * kvd}), View(dv, {b * tl * kvd}));
  }
  if (cp_rotate_ == ContextParallelRotate::kRing) {
    return AttendBackwardRing(spec, d_att, q, k, v, att, lse, dq, dk, dv);
  }
  const int64_t c = tl / 2, t = tl * context_parallel_degree();
  TITAN_RETURN_IF_ERROR(GatherSequence(k, kv_full_, kvd));
  TITAN_RETURN_IF_ERROR(GatherSequence(v, kv_full2_, kvd));
  TITAN_RETURN_IF_ERROR(Zero(dkv_full_, b * t * kvd));
  TITAN_RETURN_IF_ERROR(Zero(dkv_full2_, b * t * kvd));
  for (int half = 0; half < 2; ++half) {
    AttentionSpec chunk = spec;
    chunk.seq_len = c, chunk.kv_len = t, chunk.q_offset = ChunkStart(half), chunk.kv_offset = 0;
    const std::pair<const float*, float*> copies[] = {
        {d_att, datt_chunk_}, {q, q_chunk_}, {att, att_chunk_}};
    for (const auto& [from, to] : copies) {
      TITAN_RETURN_IF_ERROR(CopyRows(from, tl, half * c, to, c, 0, c, qd, b, false));
    }
    TITAN_RETURN_IF_ERROR(CopyRows(lse, tl, half * c, lse_chunk_, c, 0, c, 1, b * h, false));
    TITAN_RETURN_IF_ERROR(Zero(dq_chunk_, b * c * qd));
    TITAN_RETURN_IF_ERROR(compute_->AttentionBackward(
        chunk, View(datt_chunk_, {b * c * qd}), View(q_chunk_, {b * c * qd}),
        View(kv_full_, {b * t * kvd}), View(kv_full2_, {b * t * kvd}),
        View(att_chunk_, {b * c * qd}), View(lse_chunk_, {b * h * c}),
        View(dq_chunk_, {b * c * qd}), View(dkv_full_, {b * t * kvd}),
        View(dkv_full2_, {b * t * kvd})));
    TITAN_RETURN_IF_ERROR(CopyRows(dq_chunk_, c, 0, dq, tl, half * c, c, qd, b, /*add=*/true));
  }
  TITAN_RETURN_IF_ERROR(ReduceScatterSequence(dkv_full_, dk, kvd));
  return ReduceScatterSequence(dkv_full2_, dv, kvd);
}

}  // namespace titan
