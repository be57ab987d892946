// The attention role: causal grouped-query self-attention over the tokens a rank holds, and the
// layout of the sequences it imposes (which tokens of each sequence the rank holds, their global
// positions, how the loss is averaged). A model computes attention through an object implementing
// it: its own local attention by default (whole sequences on every rank); the cp plugin replaces
// it with one that splits every sequence over the context-parallel ranks.
#ifndef TITAN_ATTENTION_H_
#define TITAN_ATTENTION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "titan/communicator.h"
#include "titan/compute.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan {

// `length` consecutive tokens of a rank's local sequence, from local position `local_start` on,
// which sit at global positions `global_start` on in the whole sequence.
struct TokenRun {
  int64_t local_start = 0, length = 0, global_start = 0;
};

class CausalAttention {
 public:
  virtual ~CausalAttention() = default;

  // The layout. How many of a whole sequence's `seq_len` tokens this rank holds; an error says
  // why the sequence cannot be split.
  virtual absl::StatusOr<int64_t> LocalSeqLen(int64_t seq_len) const = 0;
  // This rank's tokens of whole [batch, seq_len] sequences: [batch, LocalSeqLen(seq_len)].
  virtual absl::StatusOr<std::vector<int32_t>> LocalTokens(const int32_t* whole, int64_t batch,
                                                           int64_t seq_len) const = 0;
  // Where a local sequence of `local_seq_len` tokens sits in the whole one, in runs covering it
  // in local order (for RoPE).
  virtual std::vector<TokenRun> Positions(int64_t local_seq_len) const = 0;
  // The whole sequences' mean loss from this rank's mean over its tokens. Collective over the
  // ranks of sequence_group().
  virtual absl::StatusOr<float> AverageLoss(float local_loss) = 0;
  // The ranks holding the rest of every sequence; null when this rank holds whole sequences. A
  // model reduces over them what must cover the whole batch (a Float8 operand's amax).
  virtual Communicator* sequence_group() const = 0;

  // The computation, on this rank's tokens (spec.seq_len of them per sequence, spec.heads and
  // spec.kv_heads this rank's heads): q, out [batch, seq_len, heads, head_dim], k, v [batch,
  // seq_len, kv_heads, head_dim], each query seeing the keys up to its global position; lse
  // [batch, heads, seq_len] receives each softmax row's log-sum-exp. Collective over
  // sequence_group().
  virtual absl::Status Forward(const AttentionSpec& spec, const TensorView& q, const TensorView& k,
                               const TensorView& v, TensorView out, TensorView lse) = 0;
  // dq, dk and dv accumulate. Collective over sequence_group().
  virtual absl::Status Backward(const AttentionSpec& spec, const TensorView& dout,
                                const TensorView& q, const TensorView& k, const TensorView& v,
                                const TensorView& out, const TensorView& lse, TensorView dq,
                                TensorView dk, TensorView dv) = 0;

  // The query-key pairs the forwards have scored so far (the causal mask's pairs, recomputations
  // included): the measure of this rank's attention work.
  virtual int64_t scored_pairs() const = 0;
  // How each query reaches its keys, for the log (e.g. "keys and values all-gathered").
  virtual std::string description() const = 0;
  // The device memory it keeps for its own scratch.
  virtual size_t workspace_bytes() const = 0;
};

// A model whose attention a plugin can replace (Module::attention_host on its root).
class AttentionHost {
 public:
  virtual ~AttentionHost() = default;
  // From the next forward on, the model computes attention through `attention`, which the caller
  // keeps alive while the model uses it; null: the model's own local attention again.
  virtual absl::Status SetAttention(CausalAttention* attention) = 0;
};

}  // namespace titan

#endif  // TITAN_ATTENTION_H_
