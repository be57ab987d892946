#include "plugins/parallel/cp/allgather_attention.h"

#include <utility>

#include "plugins/parallel/cp/sequence_gather.h"

namespace titan::cp {

absl::Status AllGatherAttention::Prepare(const AttentionSpec& spec) {
  const int64_t n = spec.batch * spec.seq_len, chunk = spec.batch * (spec.seq_len / 2);
  const int64_t qd = spec.heads * spec.head_dim, kvd = spec.kv_heads * spec.head_dim;
  const int64_t whole = n * layout_.degree * kvd;
  return Reserve(spec, {{&k_full_, whole},
                        {&v_full_, whole},
                        {&dk_full_, whole},
                        {&dv_full_, whole},
                        {&ranks_, whole},
                        {&reduced_, n * kvd},
                        {&q_chunk_, chunk * qd},
                        {&att_chunk_, chunk * qd},
                        {&datt_chunk_, chunk * qd},
                        {&dq_chunk_, chunk * qd},
                        {&lse_chunk_, chunk * spec.heads}});
}

AttentionSpec AllGatherAttention::ChunkSpec(const AttentionSpec& spec, int half) const {
  const int64_t c = spec.seq_len / 2;
  AttentionSpec chunk = spec;
  chunk.seq_len = c, chunk.kv_len = spec.seq_len * layout_.degree;
  chunk.q_offset = layout_.Index(layout_.rank, half) * c, chunk.kv_offset = 0;
  return chunk;
}

absl::Status AllGatherAttention::RunForward(const AttentionSpec& spec, const ForwardOperands& x) {
  const auto [q, k, v, att, lse] = x;
  const int64_t b = spec.batch, tl = spec.seq_len, h = spec.heads, hd = spec.head_dim;
  const int64_t qd = h * hd, kvd = spec.kv_heads * hd, c = tl / 2, t = tl * layout_.degree;
  const SequenceGather gather(group_, rows_, layout_, ranks_, reduced_, b, tl);
  TITAN_RETURN_IF_ERROR(gather.Gather(k, k_full_, kvd));
  TITAN_RETURN_IF_ERROR(gather.Gather(v, v_full_, kvd));
  for (int half = 0; half < 2; ++half) {
    const AttentionSpec chunk = ChunkSpec(spec, half);
    // The work done, counted as the query-key pairs the causal mask leaves: query i of the
    // chunk sees the keys up to its global position.
    for (int64_t i = 0; i < c; ++i) scored_pairs_ += b * h * (chunk.q_offset + i + 1);
    TITAN_RETURN_IF_ERROR(rows_.Copy(q, tl, half * c, q_chunk_, c, 0, c, qd, b, false));
    TITAN_RETURN_IF_ERROR(rows_.compute().AttentionForward(
        chunk, rows_.View(q_chunk_, b * c * qd), rows_.View(k_full_, b * t * kvd),
        rows_.View(v_full_, b * t * kvd), rows_.View(att_chunk_, b * c * qd),
        rows_.View(lse_chunk_, b * h * c)));
    TITAN_RETURN_IF_ERROR(rows_.Copy(att_chunk_, c, 0, att, tl, half * c, c, qd, b, false));
    // lse is [batch, heads, seq_len]: batch x heads rows of one value per token.
    TITAN_RETURN_IF_ERROR(rows_.Copy(lse_chunk_, c, 0, lse, tl, half * c, c, 1, b * h, false));
  }
  return absl::OkStatus();
}

absl::Status AllGatherAttention::RunBackward(const AttentionSpec& spec, const BackwardOperands& x) {
  const auto [d_att, q, k, v, att, lse, dq, dk, dv] = x;
  const int64_t b = spec.batch, tl = spec.seq_len, h = spec.heads, hd = spec.head_dim;
  const int64_t qd = h * hd, kvd = spec.kv_heads * hd, c = tl / 2, t = tl * layout_.degree;
  const SequenceGather gather(group_, rows_, layout_, ranks_, reduced_, b, tl);
  TITAN_RETURN_IF_ERROR(gather.Gather(k, k_full_, kvd));
  TITAN_RETURN_IF_ERROR(gather.Gather(v, v_full_, kvd));
  TITAN_RETURN_IF_ERROR(rows_.Zero(dk_full_, b * t * kvd));
  TITAN_RETURN_IF_ERROR(rows_.Zero(dv_full_, b * t * kvd));
  for (int half = 0; half < 2; ++half) {
    const AttentionSpec chunk = ChunkSpec(spec, half);
    const std::pair<const float*, float*> copies[] = {
        {d_att, datt_chunk_}, {q, q_chunk_}, {att, att_chunk_}};
    for (const auto& [from, to] : copies) {
      TITAN_RETURN_IF_ERROR(rows_.Copy(from, tl, half * c, to, c, 0, c, qd, b, false));
    }
    TITAN_RETURN_IF_ERROR(rows_.Copy(lse, tl, half * c, lse_chunk_, c, 0, c, 1, b * h, false));
    TITAN_RETURN_IF_ERROR(rows_.Zero(dq_chunk_, b * c * qd));
    TITAN_RETURN_IF_ERROR(rows_.compute().AttentionBackward(
        chunk, rows_.View(datt_chunk_, b * c * qd), rows_.View(q_chunk_, b * c * qd),
        rows_.View(k_full_, b * t * kvd), rows_.View(v_full_, b * t * kvd),
        rows_.View(att_chunk_, b * c * qd), rows_.View(lse_chunk_, b * h * c),
        rows_.View(dq_chunk_, b * c * qd), rows_.View(dk_full_, b * t * kvd),
        rows_.View(dv_full_, b * t * kvd)));
    TITAN_RETURN_IF_ERROR(rows_.Copy(dq_chunk_, c, 0, dq, tl, half * c, c, qd, b, /*add=*/true));
  }
  TITAN_RETURN_IF_ERROR(gather.ReduceScatter(dk_full_, dk, kvd));
  return gather.ReduceScatter(dv_full_, dv, kvd);
}

}  // namespace titan::cp
