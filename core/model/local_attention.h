// The model's own attention (titan/attention.h): every rank holds whole sequences, at positions
// 0..seq_len-1, and computes causal attention over them with the compute's kernel.
#ifndef TITAN_CORE_MODEL_LOCAL_ATTENTION_H_
#define TITAN_CORE_MODEL_LOCAL_ATTENTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "titan/attention.h"
#include "titan/compute.h"

namespace titan {

class LocalAttention : public CausalAttention {
 public:
  explicit LocalAttention(Compute& compute) : compute_(compute) {}

  absl::StatusOr<int64_t> LocalSeqLen(int64_t seq_len) const override { return seq_len; }
  absl::StatusOr<std::vector<int32_t>> LocalTokens(const int32_t* whole, int64_t batch,
                                                   int64_t seq_len) const override {
    return std::vector<int32_t>(whole, whole + batch * seq_len);
  }
  std::vector<TokenRun> Positions(int64_t local_seq_len) const override {
    return {{0, local_seq_len, 0}};
  }
  absl::StatusOr<float> AverageLoss(float local_loss) override { return local_loss; }
  Communicator* sequence_group() const override { return nullptr; }

  absl::Status Forward(const AttentionSpec& spec, const TensorView& q, const TensorView& k,
                       const TensorView& v, TensorView out, TensorView lse) override;
  absl::Status Backward(const AttentionSpec& spec, const TensorView& dout, const TensorView& q,
                        const TensorView& k, const TensorView& v, const TensorView& out,
                        const TensorView& lse, TensorView dq, TensorView dk,
                        TensorView dv) override;

  int64_t scored_pairs() const override { return scored_pairs_; }
  std::string description() const override { return "whole sequences on every rank"; }
  size_t workspace_bytes() const override { return 0; }

 private:
  Compute& compute_;
  int64_t scored_pairs_ = 0;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_LOCAL_ATTENTION_H_
