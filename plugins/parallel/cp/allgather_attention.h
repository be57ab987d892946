// Context parallelism's attention with the keys and values all-gathered (the rotate method
// "allgather"): everything but attention works token by token on a rank's two chunks; attention
// gathers the keys and values of the whole sequences (cheap under GQA: kv heads are few) and
// runs each local chunk of queries against them at its global offset. The backward
// reduce-scatters the keys' and values' gradients back to the ranks that hold them.
#ifndef TITAN_PLUGINS_PARALLEL_CP_ALLGATHER_ATTENTION_H_
#define TITAN_PLUGINS_PARALLEL_CP_ALLGATHER_ATTENTION_H_

#include <string>

#include "plugins/parallel/cp/context_attention.h"

namespace titan::cp {

class AllGatherAttention : public ContextAttention {
 public:
  using ContextAttention::ContextAttention;

  std::string description() const override { return "keys and values all-gathered"; }

 private:
  absl::Status Prepare(const AttentionSpec& spec) override;
  absl::Status RunForward(const AttentionSpec& spec, const ForwardOperands& x) override;
  absl::Status RunBackward(const AttentionSpec& spec, const BackwardOperands& x) override;
  // The spec of local chunk `half`'s queries against the whole sequences' keys.
  AttentionSpec ChunkSpec(const AttentionSpec& spec, int half) const;

  // Every rank's keys and values in global order and their gradients, the all-gather's rank
  // order, the reduce-scatter's result, and one chunk's queries, outputs (and their gradients),
  // query gradients and lse.
  float *k_full_ = nullptr, *v_full_ = nullptr, *dk_full_ = nullptr, *dv_full_ = nullptr;
  float *ranks_ = nullptr, *reduced_ = nullptr;
  float *q_chunk_ = nullptr, *att_chunk_ = nullptr, *datt_chunk_ = nullptr;
  float *dq_chunk_ = nullptr, *lse_chunk_ = nullptr;
};

}  // namespace titan::cp

#endif  // TITAN_PLUGINS_PARALLEL_CP_ALLGATHER_ATTENTION_H_
