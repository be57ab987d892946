#include "core/model/modules/decoder_block.h"

namespace titan {

namespace {
using R = ModuleContext;
}  // namespace

std::vector<ActivationSlot> DecoderBlock::Activations(BlockActs& acts) const {
  const int64_t n = ctx_.n, nl = ctx_.n_local, d = ctx_.config.dim;
  const DType dtype = ctx_.matmul_dtype;
  std::vector<ActivationSlot> slots = {
      {&acts.ln1, "ln1", {n, d}, dtype, BlockStage::kAttentionNorm},
      {&acts.rstd1, "rstd1", {nl}, DType::kF32, BlockStage::kAttentionNorm}};
  attention_->ListActivations(acts.attention, slots);
  slots.push_back({&acts.x_mid, "x_mid", {nl * d}, DType::kF32, BlockStage::kAttentionOut});
  slots.push_back({&acts.ln2, "ln2", {n, d}, dtype, BlockStage::kFfnNorm});
  slots.push_back({&acts.rstd2, "rstd2", {nl}, DType::kF32, BlockStage::kFfnNorm});
  feed_forward_->ListActivations(acts.ffn, slots);
  return slots;
}

std::vector<ProjectionInput> DecoderBlock::Projections() const {
  std::vector<ProjectionInput> projections;
  attention_->ListProjections("ln1", BlockStage::kAttentionNorm, projections);
  feed_forward_->ListProjections("ln2", BlockStage::kFfnNorm, projections);
  return projections;
}

std::vector<int> DecoderBlock::norm_weights() const {
  std::vector<int> weights = {attention_norm_.weight(), ffn_norm_.weight()};
  for (int w : attention_->norm_weights()) weights.push_back(w);
  return weights;
}

std::vector<int> DecoderBlock::linear_weights() const {
  std::vector<int> weights = attention_->weights();
  for (int w : feed_forward_->weights()) weights.push_back(w);
  return weights;
}

absl::Status DecoderBlock::Forward(const BlockActs& acts, const TensorView& x,
                                   const TensorView& out, bool recompute) {
  const int64_t nl = ctx_.n_local, d = ctx_.config.dim;
  auto run = [&](BlockStage stage) { return !recompute || !KeepsStage(policy_, stage); };
  // Under async tensor parallelism a norm's gather runs under the projection after it.
  if (run(BlockStage::kAttentionNorm)) {
    TITAN_RETURN_IF_ERROR(
        attention_norm_.Forward(x, acts.ln1, acts.rstd1, /*leave_gather=*/run(BlockStage::kQkv)));
  }
  if (run(BlockStage::kQkv)) {
    TITAN_RETURN_IF_ERROR(attention_->Project(acts.ln1, acts.attention));
    TITAN_RETURN_IF_ERROR(ctx_.FinishGather());
  }
  if (run(BlockStage::kAttention)) TITAN_RETURN_IF_ERROR(attention_->Attend(acts.attention));
  if (run(BlockStage::kAttentionOut)) {
    TITAN_RETURN_IF_ERROR(ctx_.compute.Copy(R::Reshaped(x, {nl * d}), acts.x_mid));
    TITAN_RETURN_IF_ERROR(attention_->AddOutput(acts.attention, acts.x_mid));
  }
  if (run(BlockStage::kFfnNorm)) {
    TITAN_RETURN_IF_ERROR(ffn_norm_.Forward(acts.x_mid, acts.ln2, acts.rstd2,
                                            /*leave_gather=*/run(BlockStage::kGateUp)));
  }
  if (run(BlockStage::kGateUp)) {
    TITAN_RETURN_IF_ERROR(feed_forward_->GateUp(acts.ln2, acts.ffn));
    TITAN_RETURN_IF_ERROR(ctx_.FinishGather());
  }
  if (run(BlockStage::kSwiGlu)) TITAN_RETURN_IF_ERROR(feed_forward_->SwiGlu(acts.ffn));
  if (!recompute) {
    TITAN_RETURN_IF_ERROR(ctx_.compute.Copy(acts.x_mid, R::Reshaped(out, {nl * d})));
    TITAN_RETURN_IF_ERROR(feed_forward_->AddOutput(acts.ffn, out));
  }
  return absl::OkStatus();
}

absl::Status DecoderBlock::Backward(const BlockActs& acts, const TensorView& x) {
  const int64_t n = ctx_.n, nl = ctx_.n_local, d = ctx_.config.dim;
  if (policy_ != BlockPolicy::kKeepAll) {
    TITAN_RETURN_IF_ERROR(Forward(acts, x, TensorView{}, /*recompute=*/true));
  }
  const SharedScratch& s = ctx_.scratch;
  const TensorView d_residual = R::Reshaped(s.d_residual, {nl * d});
  const TensorView d_norm_out = R::Reshaped(s.d_norm_out, {n, d});
  // The row-parallel projections need the output's gradient for every token (gathered, under
  // async tensor parallelism by the first of them as it multiplies); the column-parallel ones
  // give partial sums for every token (reduce-scattered by the norms).
  const TensorView d_out =
      ctx_.tp.size() > 1 ? R::Reshaped(s.tokens_full, {n, d}) : R::Reshaped(d_residual, {n, d});
  auto gather = [&] {
    return ctx_.GatherTokens(d_residual, R::Reshaped(s.tokens_full, {n * d}), d_out);
  };
  TITAN_RETURN_IF_ERROR(gather());
  TITAN_RETURN_IF_ERROR(feed_forward_->Backward(d_out, acts.ln2, acts.ffn, d_norm_out));
  TITAN_RETURN_IF_ERROR(ctx_.FinishGather());
  TITAN_RETURN_IF_ERROR(ffn_norm_.Backward(d_norm_out, acts.x_mid, acts.rstd2, d_residual));
  TITAN_RETURN_IF_ERROR(gather());
  TITAN_RETURN_IF_ERROR(attention_->Backward(d_out, acts.ln1, acts.attention, d_norm_out));
  TITAN_RETURN_IF_ERROR(ctx_.FinishGather());
  return attention_norm_.Backward(d_norm_out, x, acts.rstd1, d_residual);
}

}  // namespace titan
