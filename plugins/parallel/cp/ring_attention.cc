#include "plugins/parallel/cp/ring_attention.h"

#include <limits>
#include <utility>

#include "plugins/parallel/cp/ring_pass.h"

namespace titan::cp {

absl::Status RingAttention::Prepare(const AttentionSpec& spec) {
  const int64_t n = spec.batch * spec.seq_len, chunk = spec.batch * (spec.seq_len / 2);
  const int64_t qd = spec.heads * spec.head_dim, kvd = spec.kv_heads * spec.head_dim;
  const int64_t block = 2 * n * kvd;
  return Reserve(spec, {{&kv_[0], block},
                        {&kv_[1], block},
                        {&dkv_[0], block},
                        {&dkv_[1], block},
                        {&q_[0], chunk * qd},
                        {&q_[1], chunk * qd},
                        {&att_[0], chunk * qd},
                        {&att_[1], chunk * qd},
                        {&datt_[0], chunk * qd},
                        {&datt_[1], chunk * qd},
                        {&dq_[0], chunk * qd},
                        {&dq_[1], chunk * qd},
                        {&lse_[0], chunk * spec.heads},
                        {&lse_[1], chunk * spec.heads},
                        {&part_out_, chunk * qd},
                        {&part_lse_, chunk * spec.heads}});
}

absl::Status RingAttention::PackBlock(const AttentionSpec& spec, const float* k, const float* v,
                                      float* block) const {
  const int64_t tl = spec.seq_len, c = tl / 2, kvd = spec.kv_heads * spec.head_dim;
  const int64_t part = spec.batch * c * kvd;
  for (int half = 0; half < 2; ++half) {
    TITAN_RETURN_IF_ERROR(rows_.Copy(k, tl, half * c, block + 2 * half * part, c, 0, c, kvd,
                                     spec.batch, /*add=*/false));
    TITAN_RETURN_IF_ERROR(rows_.Copy(v, tl, half * c, block + (2 * half + 1) * part, c, 0, c, kvd,
                                     spec.batch, /*add=*/false));
  }
  return absl::OkStatus();
}

absl::Status RingAttention::AddBlockGradients(const AttentionSpec& spec, const float* block,
                                              float* dk, float* dv) const {
  const int64_t tl = spec.seq_len, c = tl / 2, kvd = spec.kv_heads * spec.head_dim;
  const int64_t part = spec.batch * c * kvd;
  for (int half = 0; half < 2; ++half) {
    TITAN_RETURN_IF_ERROR(rows_.Copy(block + 2 * half * part, c, 0, dk, tl, half * c, c, kvd,
                                     spec.batch, /*add=*/true));
    TITAN_RETURN_IF_ERROR(rows_.Copy(block + (2 * half + 1) * part, c, 0, dv, tl, half * c, c, kvd,
                                     spec.batch, /*add=*/true));
  }
  return absl::OkStatus();
}

std::vector<RingAttention::Pair> RingAttention::Pairs(const AttentionSpec& spec, int source) const {
  const int64_t c = spec.seq_len / 2;
  std::vector<Pair> pairs;
  for (int q_half = 0; q_half < 2; ++q_half) {
    for (int kv_half = 0; kv_half < 2; ++kv_half) {
      const int64_t q_chunk = layout_.Index(layout_.rank, q_half);
      const int64_t kv_chunk = layout_.Index(source, kv_half);
      if (kv_chunk > q_chunk) continue;  // every key after every query: nothing to see
      AttentionSpec chunk = spec;
      chunk.seq_len = c, chunk.kv_len = c, chunk.q_offset = q_chunk * c;
      chunk.kv_offset = kv_chunk * c;
      pairs.push_back({q_half, kv_half, chunk});
    }
  }
  return pairs;
}

absl::Status RingAttention::RunForward(const AttentionSpec& spec, const ForwardOperands& x) {
  const auto [q, k, v, att, lse] = x;
  const int64_t b = spec.batch, tl = spec.seq_len, h = spec.heads, c = tl / 2;
  const int64_t qd = h * spec.head_dim, kvd = spec.kv_heads * spec.head_dim;
  const int64_t chunk_q = b * c * qd, chunk_kv = b * c * kvd, chunk_lse = b * h * c;
  const int cp = layout_.degree;
  for (int half = 0; half < 2; ++half) {
    TITAN_RETURN_IF_ERROR(rows_.Copy(q, tl, half * c, q_[half], c, 0, c, qd, b, false));
    TITAN_RETURN_IF_ERROR(rows_.Zero(att_[half], chunk_q));
    TITAN_RETURN_IF_ERROR(rows_.compute().Fill(rows_.View(lse_[half], chunk_lse),
                                               -std::numeric_limits<float>::infinity()));
  }
  TITAN_RETURN_IF_ERROR(PackBlock(spec, k, v, kv_[0]));
  Transfers transfers;
  int in_hand = 0;
  for (int step = 0; step < cp; ++step) {
    const int source = (layout_.rank - step + cp) % cp;
    if (step + 1 < cp) {
      TITAN_RETURN_IF_ERROR(PassAround(group_, rows_.View(kv_[in_hand], 4 * chunk_kv),
                                       rows_.View(kv_[1 - in_hand], 4 * chunk_kv), kRingBlockTag,
                                       transfers));
    }
    const float* block = kv_[in_hand];
    for (const Pair& pair : Pairs(spec, source)) {
      const AttentionSpec& chunk = pair.spec;
      scored_pairs_ += b * h * (chunk.q_offset == chunk.kv_offset ? c * (c + 1) / 2 : c * c);
      const float* keys = block + 2 * pair.kv_half * chunk_kv;
      TITAN_RETURN_IF_ERROR(rows_.compute().AttentionForward(
          chunk, rows_.View(q_[pair.q_half], chunk_q), rows_.View(keys, chunk_kv),
          rows_.View(keys + chunk_kv, chunk_kv), rows_.View(part_out_, chunk_q),
          rows_.View(part_lse_, chunk_lse)));
      TITAN_RETURN_IF_ERROR(rows_.compute().AttentionMerge(
          chunk, rows_.View(part_out_, chunk_q), rows_.View(part_lse_, chunk_lse),
          rows_.View(att_[pair.q_half], chunk_q), rows_.View(lse_[pair.q_half], chunk_lse)));
    }
    TITAN_RETURN_IF_ERROR(WaitAll(transfers));
    in_hand = 1 - in_hand;
  }
  for (int half = 0; half < 2; ++half) {
    TITAN_RETURN_IF_ERROR(rows_.Copy(att_[half], c, 0, att, tl, half * c, c, qd, b, false));
    // lse is [batch, heads, seq_len]: batch x heads rows of one value per token.
    TITAN_RETURN_IF_ERROR(rows_.Copy(lse_[half], c, 0, lse, tl, half * c, c, 1, b * h, false));
  }
  return absl::OkStatus();
}

absl::Status RingAttention::RunBackward(const AttentionSpec& spec, const BackwardOperands& x) {
  const auto [d_att, q, k, v, att, lse, dq, dk, dv] = x;
  const int64_t b = spec.batch, tl = spec.seq_len, h = spec.heads, c = tl / 2;
  const int64_t qd = h * spec.head_dim, kvd = spec.kv_heads * spec.head_dim;
  const int64_t chunk_q = b * c * qd, chunk_kv = b * c * kvd, chunk_lse = b * h * c;
  const int cp = layout_.degree;
  for (int half = 0; half < 2; ++half) {
    const std::pair<const float*, float*> copies[] = {
        {q, q_[half]}, {att, att_[half]}, {d_att, datt_[half]}};
    for (const auto& [from, to] : copies) {
      TITAN_RETURN_IF_ERROR(rows_.Copy(from, tl, half * c, to, c, 0, c, qd, b, false));
    }
    TITAN_RETURN_IF_ERROR(rows_.Copy(lse, tl, half * c, lse_[half], c, 0, c, 1, b * h, false));
    TITAN_RETURN_IF_ERROR(rows_.Zero(dq_[half], chunk_q));
  }
  TITAN_RETURN_IF_ERROR(PackBlock(spec, k, v, kv_[0]));
  TITAN_RETURN_IF_ERROR(rows_.Zero(dkv_[0], 4 * chunk_kv));
  Transfers transfers;
  int in_hand = 0;
  for (int step = 0; step < cp; ++step) {
    const int source = (layout_.rank - step + cp) % cp;
    const int next = 1 - in_hand;
    if (step + 1 < cp) {
      TITAN_RETURN_IF_ERROR(PassAround(group_, rows_.View(kv_[in_hand], 4 * chunk_kv),
                                       rows_.View(kv_[next], 4 * chunk_kv), kRingBlockTag,
                                       transfers));
    }
    const float* block = kv_[in_hand];
    float* gradient = dkv_[in_hand];
    for (const Pair& pair : Pairs(spec, source)) {
      const int64_t at = 2 * pair.kv_half * chunk_kv;
      TITAN_RETURN_IF_ERROR(rows_.compute().AttentionBackward(
          pair.spec, rows_.View(datt_[pair.q_half], chunk_q), rows_.View(q_[pair.q_half], chunk_q),
          rows_.View(block + at, chunk_kv), rows_.View(block + at + chunk_kv, chunk_kv),
          rows_.View(att_[pair.q_half], chunk_q), rows_.View(lse_[pair.q_half], chunk_lse),
          rows_.View(dq_[pair.q_half], chunk_q), rows_.View(gradient + at, chunk_kv),
          rows_.View(gradient + at + chunk_kv, chunk_kv)));
    }
    // The gradient goes on with its block; what comes is the next block's gradient so far, and
    // after the last step this rank's own, complete.
    TITAN_RETURN_IF_ERROR(PassAround(group_, rows_.View(gradient, 4 * chunk_kv),
                                     rows_.View(dkv_[next], 4 * chunk_kv), kRingGradientTag,
                                     transfers));
    TITAN_RETURN_IF_ERROR(WaitAll(transfers));
    in_hand = next;
  }
  TITAN_RETURN_IF_ERROR(AddBlockGradients(spec, dkv_[in_hand], dk, dv));
  for (int half = 0; half < 2; ++half) {
    TITAN_RETURN_IF_ERROR(rows_.Copy(dq_[half], c, 0, dq, tl, half * c, c, qd, b, true));
  }
  return absl::OkStatus();
}

}  // namespace titan::cp
