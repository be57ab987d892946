// What both of context parallelism's attentions share (titan/attention.h): the load-balanced
// layout of the sequences over the cp group (chunks.h), the loss averaged over the group, the
// count of query-key pairs scored and the scratch they keep on the device.
#ifndef TITAN_PLUGINS_PARALLEL_CP_CONTEXT_ATTENTION_H_
#define TITAN_PLUGINS_PARALLEL_CP_CONTEXT_ATTENTION_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "plugins/parallel/cp/chunks.h"
#include "plugins/parallel/cp/rows.h"
#include "titan/attention.h"
#include "titan/communicator.h"
#include "titan/device.h"

namespace titan::cp {

class ContextAttention : public CausalAttention {
 public:
  // `group` (the cp ranks) and `device` (with a compute) outlive this object.
  ContextAttention(Communicator& group, DevicePlugin& device)
      : group_(group),
        device_(device),
        rows_(*device.compute()),
        layout_{group.rank(), group.size()} {}

  absl::StatusOr<int64_t> LocalSeqLen(int64_t seq_len) const override {
    return layout_.LocalSeqLen(seq_len);
  }
  absl::StatusOr<std::vector<int32_t>> LocalTokens(const int32_t* whole, int64_t batch,
                                                   int64_t seq_len) const override {
    return layout_.LocalTokens(whole, batch, seq_len);
  }
  std::vector<TokenRun> Positions(int64_t local_seq_len) const override {
    return layout_.Positions(local_seq_len);
  }
  // Unpack the views (f32 device memory) once, prepare the scratch for the spec, then run the
  // method's own Run* below.
  absl::Status Forward(const AttentionSpec& spec, const TensorView& q, const TensorView& k,
                       const TensorView& v, TensorView out, TensorView lse) final;
  absl::Status Backward(const AttentionSpec& spec, const TensorView& dout, const TensorView& q,
                        const TensorView& k, const TensorView& v, const TensorView& out,
                        const TensorView& lse, TensorView dq, TensorView dk, TensorView dv) final;
  // The mean of the ranks' means: every rank holds as many tokens of each sequence.
  absl::StatusOr<float> AverageLoss(float local_loss) override;
  Communicator* sequence_group() const override { return &group_; }
  int64_t scored_pairs() const override { return scored_pairs_; }
  size_t workspace_bytes() const override {
    return static_cast<size_t>(workspace_.size()) * sizeof(float);
  }

 protected:
  // One call's operands, in the order titan/attention.h passes them.
  struct ForwardOperands {
    const float *q, *k, *v;
    float *out, *lse;
  };
  struct BackwardOperands {
    const float *dout, *q, *k, *v, *out, *lse;
    float *dq, *dk, *dv;
  };
  // Sizes the method's scratch for `spec` (Reserve).
  virtual absl::Status Prepare(const AttentionSpec& spec) = 0;
  virtual absl::Status RunForward(const AttentionSpec& spec, const ForwardOperands& x) = 0;
  virtual absl::Status RunBackward(const AttentionSpec& spec, const BackwardOperands& x) = 0;
  // Points each slot at its floats of one device buffer, allocated anew only when the shape of
  // the attention changes (the slots' sizes are a function of it).
  absl::Status Reserve(const AttentionSpec& spec,
                       const std::vector<std::pair<float**, int64_t>>& slots);

  Communicator& group_;
  DevicePlugin& device_;
  Rows rows_;
  ChunkLayout layout_;
  int64_t scored_pairs_ = 0;

 private:
  DeviceBuffer workspace_;
  AttentionSpec reserved_for_{};
};

}  // namespace titan::cp

#endif  // TITAN_PLUGINS_PARALLEL_CP_CONTEXT_ATTENTION_H_
