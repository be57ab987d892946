// Context parallelism's ring (the rotate method "alltoall", as TorchTitan calls it): instead of
// all-gathering every rank's keys and values, each rank passes its block (the keys and values of
// its two chunks) to the next rank of the cp ring while it attends to the block in hand, so a
// rank never holds more than two blocks. Its queries attend to each block chunk by chunk (pairs
// the causal mask hides entirely are skipped) and the partial results are merged by their
// log-sum-exp (Compute::AttentionMerge). The backward passes the blocks around again with their
// gradients travelling beside them; after a full turn each block's gradient, summed over every
// rank's queries, takes one more step home to its owner.
#ifndef TITAN_PLUGINS_PARALLEL_CP_RING_ATTENTION_H_
#define TITAN_PLUGINS_PARALLEL_CP_RING_ATTENTION_H_

#include <string>
#include <vector>

#include "plugins/parallel/cp/context_attention.h"

namespace titan::cp {

class RingAttention : public ContextAttention {
 public:
  using ContextAttention::ContextAttention;

  std::string description() const override { return "keys and values passed around the ring"; }

  // A query chunk of this rank against a key chunk of the block in hand, and where they sit.
  struct Pair {
    int q_half, kv_half;
    AttentionSpec spec;
  };
  // The pairs of this rank's query chunks and `source`'s key chunks that the causal mask leaves.
  std::vector<Pair> Pairs(const AttentionSpec& spec, int source) const;

 private:
  absl::Status Prepare(const AttentionSpec& spec) override;
  absl::Status RunForward(const AttentionSpec& spec, const ForwardOperands& x) override;
  absl::Status RunBackward(const AttentionSpec& spec, const BackwardOperands& x) override;
  // K and V [batch, seq_len, kvd] into a block: for each chunk, its keys then its values, each
  // [batch, chunk, kvd]; and a block of gradients added back into dk and dv.
  absl::Status PackBlock(const AttentionSpec& spec, const float* k, const float* v,
                         float* block) const;
  absl::Status AddBlockGradients(const AttentionSpec& spec, const float* block, float* dk,
                                 float* dv) const;

  // The block of keys and values in hand and the next one, and their gradients (each 4 x
  // [batch, chunk, kvd]); this rank's queries, outputs, output gradients, query gradients and
  // lse by chunk; one partial result.
  float *kv_[2]{}, *dkv_[2]{}, *q_[2]{}, *att_[2]{}, *datt_[2]{}, *dq_[2]{}, *lse_[2]{};
  float *part_out_ = nullptr, *part_lse_ = nullptr;
};

}  // namespace titan::cp

#endif  // TITAN_PLUGINS_PARALLEL_CP_RING_ATTENTION_H_
