#include "core/model/modules/token_embedding.h"

#include "core/model/modules/weight_pass.h"

namespace titan {

absl::Status TokenEmbedding::Forward(const TensorView& out) {
  const int64_t n = ctx_.n, d = ctx_.config.dim;
  const TensorView embedded =
      ModuleContext::Reshaped(ctx_.tp.size() > 1 ? ctx_.scratch.tokens_full : out, {n * d});
  TITAN_RETURN_IF_ERROR(ctx_.compute.EmbeddingForward(
      ctx_.token_ids, ctx_.parameters[weight_].value, ctx_.local().first_vocab, embedded));
  return ctx_.tp.ReduceScatterTokens(embedded, ModuleContext::Reshaped(out, {ctx_.n_local * d}))
      .status();
}

absl::Status TokenEmbedding::Backward(const TensorView& d_out, ModuleNode* hooks) {
  const int64_t n = ctx_.n, d = ctx_.config.dim;
  TITAN_ASSIGN_OR_RETURN(
      TensorView d_embedded,
      ctx_.tp.GatherTokens(ModuleContext::Reshaped(d_out, {ctx_.n_local * d}),
                           ModuleContext::Reshaped(ctx_.scratch.tokens_full, {n * d})));
  d_embedded = ctx_.F32(d_embedded.data, {n * d});
  if (ctx_.deferring != nullptr) {
    TITAN_ASSIGN_OR_RETURN(TensorView saved,
                           ctx_.deferring->Keep(d_embedded, weight_, /*input=*/false));
    ctx_.deferring->Add(DeferredGrad::kEmbedding, weight_, n, saved, TensorView{});
    return absl::OkStatus();
  }
  if (hooks != nullptr) TITAN_RETURN_IF_ERROR(hooks->BeforeBackward());
  TITAN_RETURN_IF_ERROR(WeightGrad(d_embedded));
  return hooks != nullptr ? hooks->AfterBackward() : absl::OkStatus();
}

absl::Status TokenEmbedding::WeightGrad(const TensorView& d_embedded) {
  return ctx_.compute.EmbeddingBackward(ctx_.token_ids, d_embedded, ctx_.local().first_vocab,
                                        ctx_.parameters[weight_].grad);
}

}  // namespace titan
