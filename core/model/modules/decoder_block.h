// A pre-norm decoder block: x + attention(norm(x)), then + feed_forward(norm(.)), the feed-forward
// dense or a mixture of experts as the family builds it. Its forward
// runs in stages (activation_checkpoint.h) so that a policy can keep some stages' outputs and
// recompute the others before the backward.
#ifndef TITAN_CORE_MODEL_MODULES_DECODER_BLOCK_H_
#define TITAN_CORE_MODEL_MODULES_DECODER_BLOCK_H_

#include <memory>
#include <vector>

#include "core/model/modules/feed_forward.h"
#include "core/model/modules/rms_norm.h"
#include "core/model/modules/self_attention.h"

namespace titan {

// One block's activations for one microbatch, in its activation set or the shared recompute
// scratch.
struct BlockActs {
  TensorView ln1, rstd1;  // the attention norm's output [n, d] (matmul dtype), rstd [n_local]
  AttentionActs attention;
  TensorView x_mid;       // [n_local * d]: x + the attention's output
  TensorView ln2, rstd2;  // the feed-forward norm's
  FeedForwardActs ffn;
};

class DecoderBlock {
 public:
  // The norms' weights index the context's parameters.
  DecoderBlock(ModuleContext& context, int attention_norm, const AttentionWeights& attention,
               int ffn_norm, std::unique_ptr<FeedForwardLayer> feed_forward, BlockPolicy policy)
      : DecoderBlock(context, attention_norm, std::make_unique<SelfAttention>(context, attention),
                     ffn_norm, std::move(feed_forward), policy) {}
  // With another attention (DeepSeek-V3's latent attention).
  DecoderBlock(ModuleContext& context, int attention_norm,
               std::unique_ptr<AttentionLayer> attention, int ffn_norm,
               std::unique_ptr<FeedForwardLayer> feed_forward, BlockPolicy policy)
      : ctx_(context),
        policy_(policy),
        attention_norm_(context, attention_norm),
        attention_(std::move(attention)),
        ffn_norm_(context, ffn_norm),
        feed_forward_(std::move(feed_forward)) {}

  BlockPolicy policy() const { return policy_; }
  // Every activation, in the order the model plans them.
  std::vector<ActivationSlot> Activations(BlockActs& acts) const;
  // The linear layers (self-attention's wq, wk, wv, wo; w1, w3, w2), with the inputs their weight
  // pass reads.
  std::vector<ProjectionInput> Projections() const;
  // The norms' weights (QK-norm's too).
  std::vector<int> norm_weights() const;
  FeedForwardLayer& feed_forward() { return *feed_forward_; }
  // Every linear layer's weight, in the order of the block's parameters.
  std::vector<int> linear_weights() const;
  // The routed experts' weights (FeedForwardLayer::expert_weights).
  std::vector<int> expert_weights() const { return feed_forward_->expert_weights(); }

  // out [n_local, d] from x [n_local, d]; with `recompute` only the stages whose outputs the
  // policy did not keep, for the backward (out untouched).
  absl::Status Forward(const BlockActs& acts, const TensorView& x, const TensorView& out,
                       bool recompute);
  // d_x (in the context's d_residual scratch, this rank's tokens) from the gradient of the
  // block's output there, updated in place: the skip connections pass it through unchanged
  // and the branches add to it.
  absl::Status Backward(const BlockActs& acts, const TensorView& x);

 private:
  ModuleContext& ctx_;
  BlockPolicy policy_;
  RmsNorm attention_norm_;
  std::unique_ptr<AttentionLayer> attention_;
  RmsNorm ffn_norm_;
  std::unique_ptr<FeedForwardLayer> feed_forward_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_DECODER_BLOCK_H_
