// Context parallelism's ring (context_parallel_rotate_method = "alltoall", as TorchTitan calls
// it): instead of all-gathering every rank's keys and values, each rank passes its block (the
// keys and values of its two chunks) to the next rank of the cp ring while it attends to the
// block in hand, so a rank never holds more than two blocks. Its queries attend to each block
// chunk by chunk (pairs the causal mask hides entirely are skipped) and the partial results are
// merged by their log-sum-exp (Compute::AttentionMerge). The backward passes the blocks around
// again with their gradients travelling beside them; after a full turn each block's gradient,
// summed over every rank's queries, takes one more step home to its owner.
#include <limits>
#include <memory>
#include <vector>

#include "core/model/llama.h"

namespace titan {
namespace {

// Message tags of the ring on the cp group: blocks of keys and values, and their gradients.
constexpr int kRingBlockTag = 27000, kRingGradientTag = 27001;

absl::Status WaitAll(std::vector<std::unique_ptr<Communicator::Transfer>>& transfers) {
  for (auto& transfer : transfers) TITAN_RETURN_IF_ERROR(transfer->Wait());
  transfers.clear();
  return absl::OkStatus();
}

}  // namespace

int64_t LlamaModel::RingChunkIndex(int rank, int half) const {
  const int cp = context_parallel_degree();
  return half == 0 ? rank : 2 * cp - 1 - rank;
}

absl::Status LlamaModel::PackRingBlock(const float* k, const float* v, float* block,
                                       int64_t kvd) const {
  const int64_t c = seq_len_ / 2, part = batch_ * c * kvd;
  for (int half = 0; half < 2; ++half) {
    TITAN_RETURN_IF_ERROR(CopyRows(k, seq_len_, half * c, block + 2 * half * part, c, 0, c, kvd,
                                   batch_, /*add=*/false));
    TITAN_RETURN_IF_ERROR(CopyRows(v, seq_len_, half * c, block + (2 * half + 1) * part, c, 0, c,
                                   kvd, batch_, /*add=*/false));
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::AddRingGradients(const float* block, float* dk, float* dv,
                                          int64_t kvd) const {
  const int64_t c = seq_len_ / 2, part = batch_ * c * kvd;
  for (int half = 0; half < 2; ++half) {
    TITAN_RETURN_IF_ERROR(CopyRows(block + 2 * half * part, c, 0, dk, seq_len_, half * c, c, kvd,
                                   batch_, /*add=*/true));
    TITAN_RETURN_IF_ERROR(CopyRows(block + (2 * half + 1) * part, c, 0, dv, seq_len_, half * c, c,
                                   kvd, batch_, /*add=*/true));
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::PassAround(const float* send, float* receive, int64_t floats, int tag,
                                    Transfers& transfers) {
  const int cp = context_parallel_degree(), r = cp_->rank();
  auto send_next = [&]() -> absl::Status {
    TITAN_ASSIGN_OR_RETURN(auto transfer, cp_->StartSend(View(send, {floats}), (r + 1) % cp, tag));
    transfers.push_back(std::move(transfer));
    return absl::OkStatus();
  };
  auto receive_previous = [&]() -> absl::Status {
    TITAN_ASSIGN_OR_RETURN(auto transfer,
                           cp_->StartRecv(View(receive, {floats}), (r + cp - 1) % cp, tag));
    transfers.push_back(std::move(transfer));
    return absl::OkStatus();
  };
  // Even ranks send first, odd ranks receive first: a communicator whose point-to-point calls
  // block in issue order (NCCL's) then never waits in a circle.
  if (r % 2 == 0) {
    TITAN_RETURN_IF_ERROR(send_next());
    return receive_previous();
  }
  TITAN_RETURN_IF_ERROR(receive_previous());
  return send_next();
}

std::vector<LlamaModel::RingPair> LlamaModel::RingPairs(const AttentionSpec& spec,
                                                        int source) const {
  const int64_t c = seq_len_ / 2;
  std::vector<RingPair> pairs;
  for (int q_half = 0; q_half < 2; ++q_half) {
    for (int kv_half = 0; kv_half < 2; ++kv_half) {
      const int64_t q_chunk = RingChunkIndex(cp_->rank(), q_half);
      const int64_t kv_chunk = RingChunkIndex(source, kv_half);
      if (kv_chunk > q_chunk) continue;  // every key after every query: nothing to see
      AttentionSpec chunk = spec;
      chunk.seq_len = c, chunk.kv_len = c, chunk.q_offset = q_chunk * c;
      chunk.kv_offset = kv_chunk * c;
      pairs.push_back({q_half, kv_half, chunk});
    }
  }
  return pairs;
}

absl::Status LlamaModel::AttendRing(const AttentionSpec& spec, const float* q, const float* k,
                                    const float* v, float* att, float* lse) {
  const int64_t b = spec.batch, tl = spec.seq_len, h = spec.heads, c = tl / 2;
  const int64_t qd = h * spec.head_dim, kvd = spec.kv_heads * spec.head_dim;
  const int64_t chunk_q = b * c * qd, chunk_kv = b * c * kvd, chunk_lse = b * h * c;
  const int cp = context_parallel_degree();
  for (int half = 0; half < 2; ++half) {
    TITAN_RETURN_IF_ERROR(CopyRows(q, tl, half * c, ring_.q[half], c, 0, c, qd, b, false));
    TITAN_RETURN_IF_ERROR(Zero(ring_.att[half], chunk_q));
    TITAN_RETURN_IF_ERROR(compute_->Fill(View(ring_.lse[half], {chunk_lse}),
                                         -std::numeric_limits<float>::infinity()));
  }
  TITAN_RETURN_IF_ERROR(PackRingBlock(k, v, ring_.kv[0], kvd));
  Transfers transfers;
  int in_hand = 0;
  for (int step = 0; step < cp; ++step) {
    const int source = (cp_->rank() - step + cp) % cp;
    if (step + 1 < cp) {
      TITAN_RETURN_IF_ERROR(PassAround(ring_.kv[in_hand], ring_.kv[1 - in_hand], 4 * chunk_kv,
                                       kRingBlockTag, transfers));
    }
    const float* block = ring_.kv[in_hand];
    for (const RingPair& pair : RingPairs(spec, source)) {
      const AttentionSpec& chunk = pair.spec;
      attention_pairs_ += b * h * (chunk.q_offset == chunk.kv_offset ? c * (c + 1) / 2 : c * c);
      const float* keys = block + 2 * pair.kv_half * chunk_kv;
      TITAN_RETURN_IF_ERROR(compute_->AttentionForward(
          chunk, View(ring_.q[pair.q_half], {chunk_q}), View(keys, {chunk_kv}),
          View(keys + chunk_kv, {chunk_kv}), View(ring_.part_out, {chunk_q}),
          View(ring_.part_lse, {chunk_lse})));
      TITAN_RETURN_IF_ERROR(compute_->AttentionMerge(
          chunk, View(ring_.part_out, {chunk_q}), View(ring_.part_lse, {chunk_lse}),
          View(ring_.att[pair.q_half], {chunk_q}), View(ring_.lse[pair.q_half], {chunk_lse})));
    }
    TITAN_RETURN_IF_ERROR(WaitAll(transfers));
    in_hand = 1 - in_hand;
  }
  for (int half = 0; half < 2; ++half) {
    TITAN_RETURN_IF_ERROR(CopyRows(ring_.att[half], c, 0, att, tl, half * c, c, qd, b, false));
    // lse is [batch, heads, seq_len]: batch x heads rows of one value per token.
    TITAN_RETURN_IF_ERROR(CopyRows(ring_.lse[half], c, 0, lse, tl, half * c, c, 1, b * h, false));
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::AttendBackwardRing(const AttentionSpec& spec, const float* d_att,
                                            const float* q, const float* k, const float* v,
                                            const float* att, const float* lse, float* dq,
                                            float* dk, float* dv) {
  const int64_t b = spec.batch, tl = spec.seq_len, h = spec.heads, c = tl / 2;
  const int64_t qd = h * spec.head_dim, kvd = spec.kv_heads * spec.head_dim;
  const int64_t chunk_q = b * c * qd, chunk_kv = b * c * kvd, chunk_lse = b * h * c;
  const int cp = context_parallel_degree();
  for (int half = 0; half < 2; ++half) {
    const std::pair<const float*, float*> copies[] = {
        {q, ring_.q[half]}, {att, ring_.att[half]}, {d_att, ring_.datt[half]}};
    for (const auto& [from, to] : copies) {
      TITAN_RETURN_IF_ERROR(CopyRows(from, tl, half * c, to, c, 0, c, qd, b, false));
    }
    TITAN_RETURN_IF_ERROR(CopyRows(lse, tl, half * c, ring_.lse[half], c, 0, c, 1, b * h, false));
    TITAN_RETURN_IF_ERROR(Zero(ring_.dq[half], chunk_q));
  }
  TITAN_RETURN_IF_ERROR(PackRingBlock(k, v, ring_.kv[0], kvd));
  TITAN_RETURN_IF_ERROR(Zero(ring_.dkv[0], 4 * chunk_kv));
  Transfers transfers;
  int in_hand = 0;
  for (int step = 0; step < cp; ++step) {
    const int source = (cp_->rank() - step + cp) % cp;
    const int next = 1 - in_hand;
    if (step + 1 < cp) {
      TITAN_RETURN_IF_ERROR(PassAround(ring_.kv[in_hand], ring_.kv[next], 4 * chunk_kv,
                                       kRingBlockTag, transfers));
    }
    const float* block = ring_.kv[in_hand];
    float* gradient = ring_.dkv[in_hand];
    for (const RingPair& pair : RingPairs(spec, source)) {
      const int64_t at = 2 * pair.kv_half * chunk_kv;
      TITAN_RETURN_IF_ERROR(compute_->AttentionBackward(
          pair.spec, View(ring_.datt[pair.q_half], {chunk_q}),
          View(ring_.q[pair.q_half], {chunk_q}), View(block + at, {chunk_kv}),
          View(block + at + chunk_kv, {chunk_kv}), View(ring_.att[pair.q_half], {chunk_q}),
          View(ring_.lse[pair.q_half], {chunk_lse}), View(ring_.dq[pair.q_half], {chunk_q}),
          View(gradient + at, {chunk_kv}), View(gradient + at + chunk_kv, {chunk_kv})));
    }
    // The gradient goes on with its block; what comes is the next block's gradient so far, and
    // after the last step this rank's own, complete.
    TITAN_RETURN_IF_ERROR(
        PassAround(gradient, ring_.dkv[next], 4 * chunk_kv, kRingGradientTag, transfers));
    TITAN_RETURN_IF_ERROR(WaitAll(transfers));
    in_hand = next;
  }
  TITAN_RETURN_IF_ERROR(AddRingGradients(ring_.dkv[in_hand], dk, dv, kvd));
  for (int half = 0; half < 2; ++half) {
    TITAN_RETURN_IF_ERROR(CopyRows(ring_.dq[half], c, 0, dq, tl, half * c, c, qd, b, true));
  }
  return absl::OkStatus();
}

}  // namespace titan
