#include "core/model/local_attention.h"

namespace titan {

absl::Status LocalAttention::Forward(const AttentionSpec& spec, const TensorView& q,
                                     const TensorView& k, const TensorView& v, TensorView out,
                                     TensorView lse) {
  // Query i sees keys 0..i: seq_len (seq_len + 1) / 2 pairs per head of each sequence.
  scored_pairs_ += spec.batch * spec.heads * spec.seq_len * (spec.seq_len + 1) / 2;
  return compute_.AttentionForward(spec, q, k, v, out, lse);
}

absl::Status LocalAttention::Backward(const AttentionSpec& spec, const TensorView& dout,
                                      const TensorView& q, const TensorView& k, const TensorView& v,
                                      const TensorView& out, const TensorView& lse, TensorView dq,
                                      TensorView dk, TensorView dv) {
  return compute_.AttentionBackward(spec, dout, q, k, v, out, lse, dq, dk, dv);
}

}  // namespace titan
