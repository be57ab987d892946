#include "core/model/modules/feed_forward.h"

namespace titan {

namespace {
using R = ModuleContext;
}  // namespace

FeedForward::FeedForward(ModuleContext& context, int w1, int w2, int w3, bool shared)
    : ctx_(context),
      w1_(context, w1),
      w2_(context, w2),
      w3_(context, w3),
      shared_(shared),
      a_name_(shared ? "shared_a" : "a"),
      b_name_(shared ? "shared_b" : "b"),
      h_name_(shared ? "shared_h" : "h") {}

int64_t FeedForward::hidden() const {
  const LocalSizes local = ctx_.local();
  return shared_ ? local.shared_hidden : local.hidden;
}

void FeedForward::ListActivations(FeedForwardActs& acts, std::vector<ActivationSlot>& slots) const {
  const int64_t n = ctx_.n, f = hidden();
  slots.push_back({&acts.a, a_name_, {n * f}, DType::kF32, BlockStage::kGateUp});
  slots.push_back({&acts.b, b_name_, {n * f}, DType::kF32, BlockStage::kGateUp});
  slots.push_back({&acts.h, h_name_, {n, f}, ctx_.matmul_dtype, BlockStage::kSwiGlu});
}

void FeedForward::ListProjections(const char* normed, BlockStage norm_stage,
                                  std::vector<ProjectionInput>& projections) const {
  const int64_t d = ctx_.config.dim, f = hidden();
  const DType dtype = ctx_.matmul_dtype;
  projections.push_back({w1_.weight(), f, d, normed, norm_stage, dtype});
  projections.push_back({w3_.weight(), f, d, normed, norm_stage, dtype});
  projections.push_back({w2_.weight(), d, f, h_name_, BlockStage::kSwiGlu, dtype});
}

absl::Status FeedForward::GateUp(const TensorView& x, const FeedForwardActs& acts) {
  const int64_t n = ctx_.n, f = hidden();
  TITAN_RETURN_IF_ERROR(w1_.Forward(x, R::Reshaped(acts.a, {n, f})));
  return w3_.Forward(x, R::Reshaped(acts.b, {n, f}));
}

absl::Status FeedForward::SwiGlu(const FeedForwardActs& acts) {
  // acts.h in the matmul dtype: a bf16 one rounded once from the f32 product.
  return ctx_.compute.SwiGluForward(acts.a, acts.b, acts.h);
}

absl::Status FeedForward::AddOutput(const FeedForwardActs& acts, const TensorView& out) {
  return w2_.AddRowParallel(acts.h, out);
}

absl::Status FeedForward::AddPartialOutput(const FeedForwardActs& acts, const TensorView& full) {
  return w2_.Forward(acts.h, full, /*accumulate=*/true);
}

absl::Status FeedForward::Backward(const TensorView& d_out, const TensorView& x,
                                   const FeedForwardActs& acts, const TensorView& dx) {
  const int64_t n = ctx_.n, f = hidden();
  const SharedScratch& s = ctx_.scratch;
  const TensorView d_h = R::Reshaped(s.d_h, {n, f});
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_h));
  TITAN_RETURN_IF_ERROR(w2_.Backward(d_out, acts.h, d_h));
  const TensorView d_a = R::Reshaped(s.d_a, {n * f}), d_b = R::Reshaped(s.d_b, {n * f});
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_a));
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_b));
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.SwiGluBackward(R::Reshaped(d_h, {n * f}), acts.a, acts.b, d_a, d_b));
  TITAN_RETURN_IF_ERROR(ctx_.Zero(dx));
  TITAN_RETURN_IF_ERROR(w1_.Backward(R::Reshaped(d_a, {n, f}), x, dx));
  // A mixture of experts adds its routed experts' input gradients after its shared experts'.
  return w3_.Backward(R::Reshaped(d_b, {n, f}), x, dx, /*scatter_dinp=*/!shared_);
}

}  // namespace titan
