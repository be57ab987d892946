#include "core/model/modules/moe_feed_forward.h"

#include "absl/strings/str_cat.h"

namespace titan {

namespace {
using R = ModuleContext;

// Rows [first, first + count) of a row-major [rows, columns] view.
TensorView Rows(const TensorView& view, int64_t first, int64_t count) {
  const int64_t columns = view.shape[1];
  TensorView rows = view;
  rows.data =
      static_cast<char*>(view.data) + static_cast<size_t>(first * columns) * DTypeSize(view.dtype);
  rows.shape = {count, columns};
  rows.strides.clear();
  return rows;
}

// Expert e's matrix [rows, columns] of a weight [experts, rows, columns].
TensorView Expert(const TensorView& weight, int64_t e) {
  const int64_t rows = weight.shape[1], columns = weight.shape[2];
  TensorView one = R::Reshaped(weight, {weight.shape[0] * rows, columns});
  return Rows(one, e * rows, rows);
}

}  // namespace

MoeFeedForward::MoeFeedForward(ModuleContext& context, const MoeWeights& w)
    : ctx_(context), w_(w), router_(context, w.router) {
  if (w.shared_w1 >= 0) {
    shared_ = std::make_unique<FeedForward>(context, w.shared_w1, w.shared_w2, w.shared_w3,
                                            /*shared=*/true);
  }
  load_.assign(context.config.moe.experts, 0);
}

MoeRouting MoeFeedForward::Routing() const {
  const MoeConfig& moe = ctx_.config.moe;
  MoeRouting routing;
  routing.score = moe.sigmoid ? MoeRouting::Score::kSigmoid : MoeRouting::Score::kSoftmax;
  routing.top_k = moe.top_k;
  routing.normalize = moe.normalize;
  routing.scale = static_cast<float>(moe.route_scale);
  routing.groups = moe.groups;
  routing.groups_chosen = moe.groups_chosen;
  return routing;
}

void MoeFeedForward::ListActivations(FeedForwardActs& acts,
                                     std::vector<ActivationSlot>& slots) const {
  const MoeConfig& moe = ctx_.config.moe;
  const int64_t n = ctx_.n, d = ctx_.config.dim, e = moe.experts, k = moe.top_k;
  const int64_t m = n * k, hm = moe.hidden_dim;
  const DType dtype = ctx_.matmul_dtype;
  RoutedActs& r = acts.routed;
  slots.push_back({&r.logits, "router_logits", {n, e}, DType::kF32, BlockStage::kGateUp});
  slots.push_back({&r.experts, "routed_experts", {n, k}, DType::kI32, BlockStage::kGateUp});
  slots.push_back({&r.weights, "routed_weights", {n, k}, DType::kF32, BlockStage::kGateUp});
  slots.push_back({&r.slots, "routed_slots", {m}, DType::kI32, BlockStage::kGateUp});
  slots.push_back({&r.counts, "routed_counts", {e}, DType::kI32, BlockStage::kGateUp});
  slots.push_back({&r.x, "routed_x", {m, d}, dtype, BlockStage::kGateUp});
  slots.push_back({&r.a, "routed_a", {m * hm}, DType::kF32, BlockStage::kGateUp});
  slots.push_back({&r.b, "routed_b", {m * hm}, DType::kF32, BlockStage::kGateUp});
  slots.push_back({&r.h, "routed_h", {m, hm}, dtype, BlockStage::kSwiGlu});
  slots.push_back({&r.y, "routed_y", {m, d}, DType::kF32, BlockStage::kSwiGlu});
  if (shared_ != nullptr) shared_->ListActivations(acts, slots);
}

void MoeFeedForward::ListProjections(const char* normed, BlockStage norm_stage,
                                     std::vector<ProjectionInput>& projections) const {
  if (shared_ != nullptr) shared_->ListProjections(normed, norm_stage, projections);
}

std::vector<int> MoeFeedForward::weights() const {
  return shared_ != nullptr ? shared_->weights() : std::vector<int>{};
}

absl::StatusOr<std::vector<int32_t>> MoeFeedForward::Counts(const RoutedActs& acts) const {
  std::vector<int32_t> counts(ctx_.config.moe.experts);
  TITAN_RETURN_IF_ERROR(ctx_.compute.CopyToHost(acts.counts, counts.data()));
  return counts;
}

absl::Status MoeFeedForward::GroupedGemm(const std::vector<int32_t>& counts, const TensorView& in,
                                         const TensorView& w, bool transpose_w, float beta,
                                         const TensorView& out) const {
  int64_t first = 0;
  for (int64_t e = 0; e < static_cast<int64_t>(counts.size()); ++e) {
    if (counts[e] == 0) continue;
    TITAN_RETURN_IF_ERROR(ctx_.compute.Gemm(Rows(in, first, counts[e]), false, Expert(w, e),
                                            transpose_w, 1.0f, beta, Rows(out, first, counts[e])));
    first += counts[e];
  }
  return absl::OkStatus();
}

absl::Status MoeFeedForward::GroupedWeightGrad(const std::vector<int32_t>& counts,
                                               const TensorView& g, const TensorView& in,
                                               int weight) const {
  const TensorView grad = ctx_.Grad(weight);
  int64_t first = 0;
  for (int64_t e = 0; e < static_cast<int64_t>(counts.size()); ++e) {
    if (counts[e] == 0) continue;
    TITAN_RETURN_IF_ERROR(ctx_.compute.Gemm(Rows(g, first, counts[e]), true,
                                            Rows(in, first, counts[e]), false, 1.0f, 1.0f,
                                            Expert(grad, e)));
    first += counts[e];
  }
  return absl::OkStatus();
}

absl::Status MoeFeedForward::GateUp(const TensorView& x, const FeedForwardActs& acts) {
  const MoeConfig& moe = ctx_.config.moe;
  const int64_t n = ctx_.n, d = ctx_.config.dim, m = n * moe.top_k, hm = moe.hidden_dim;
  const RoutedActs& r = acts.routed;
  TITAN_RETURN_IF_ERROR(router_.Forward(x, r.logits));
  const TensorView bias = w_.bias >= 0 ? ctx_.Value(w_.bias) : TensorView{};
  TITAN_RETURN_IF_ERROR(ctx_.compute.MoeRoute(r.logits, bias, Routing(), r.experts, r.weights));
  TITAN_RETURN_IF_ERROR(ctx_.compute.MoePermute(r.experts, r.counts, r.slots));
  TITAN_RETURN_IF_ERROR(ctx_.compute.MoeDispatch(R::Reshaped(x, {n, d}), r.slots, r.x));
  TITAN_ASSIGN_OR_RETURN(const std::vector<int32_t> counts, Counts(r));
  // w1's operand is spent before w3's takes the same scratch.
  TITAN_ASSIGN_OR_RETURN(TensorView w1, ctx_.WeightOperand(w_.w1));
  TITAN_RETURN_IF_ERROR(GroupedGemm(counts, r.x, w1, true, 0.0f, R::Reshaped(r.a, {m, hm})));
  TITAN_ASSIGN_OR_RETURN(TensorView w3, ctx_.WeightOperand(w_.w3));
  TITAN_RETURN_IF_ERROR(GroupedGemm(counts, r.x, w3, true, 0.0f, R::Reshaped(r.b, {m, hm})));
  return shared_ != nullptr ? shared_->GateUp(x, acts) : absl::OkStatus();
}

absl::Status MoeFeedForward::SwiGlu(const FeedForwardActs& acts) {
  const MoeConfig& moe = ctx_.config.moe;
  const int64_t m = ctx_.n * moe.top_k, hm = moe.hidden_dim;
  const RoutedActs& r = acts.routed;
  const bool f32 = r.h.dtype == DType::kF32;
  const TensorView h = f32 ? r.h : R::Reshaped(ctx_.scratch.moe_d_h, {m, hm});
  TITAN_RETURN_IF_ERROR(ctx_.compute.SwiGluForward(r.a, r.b, h));
  if (!f32) TITAN_RETURN_IF_ERROR(ctx_.compute.Cast(h, r.h));
  TITAN_ASSIGN_OR_RETURN(const std::vector<int32_t> counts, Counts(r));
  TITAN_ASSIGN_OR_RETURN(TensorView w2, ctx_.WeightOperand(w_.w2));
  TITAN_RETURN_IF_ERROR(GroupedGemm(counts, r.h, w2, true, 0.0f, r.y));
  return shared_ != nullptr ? shared_->SwiGlu(acts) : absl::OkStatus();
}

absl::Status MoeFeedForward::AddOutput(const FeedForwardActs& acts, const TensorView& out) {
  const RoutedActs& r = acts.routed;
  const int64_t d = ctx_.config.dim;
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.MoeCombine(r.y, r.weights, r.slots, R::Reshaped(out, {ctx_.n, d})));
  return shared_ != nullptr ? shared_->AddOutput(acts, out) : absl::OkStatus();
}

absl::Status MoeFeedForward::Backward(const TensorView& d_out, const TensorView& x,
                                      const FeedForwardActs& acts, const TensorView& dx) {
  if (ctx_.deferring != nullptr) {
    return absl::UnimplementedError(
        "model: a mixture of experts does not split its backward into input and weight passes; "
        "use a pipeline schedule without the zero-bubble split (not ZBVZeroBubble, "
        "Interleaved ZB or DualPipeV)");
  }
  const MoeConfig& moe = ctx_.config.moe;
  const int64_t n = ctx_.n, d = ctx_.config.dim, k = moe.top_k, m = n * k, hm = moe.hidden_dim;
  const RoutedActs& r = acts.routed;
  const SharedScratch& s = ctx_.scratch;
  if (shared_ != nullptr) {
    TITAN_RETURN_IF_ERROR(shared_->Backward(d_out, x, acts, dx));
  } else {
    TITAN_RETURN_IF_ERROR(ctx_.Zero(dx));
  }
  const TensorView d_y = R::Reshaped(s.moe_d_y, {m, d});
  const TensorView d_weights = R::Reshaped(s.moe_d_weights, {n, k});
  TITAN_RETURN_IF_ERROR(ctx_.compute.MoeCombineBackward(R::Reshaped(d_out, {n, d}), r.y, r.weights,
                                                        r.slots, d_y, d_weights));
  TITAN_ASSIGN_OR_RETURN(const std::vector<int32_t> counts, Counts(r));
  // The load counts once per trained microbatch: here, not in the forward, which validation,
  // sampling and recomputation also run.
  for (size_t e = 0; e < counts.size(); ++e) load_[e] += counts[e];
  // Through the experts' down projections.
  const TensorView d_h = R::Reshaped(s.moe_d_h, {m, hm});
  TITAN_ASSIGN_OR_RETURN(const TensorView g_y, ctx_.Operand(d_y, OperandScratch::kGrad));
  TITAN_ASSIGN_OR_RETURN(TensorView w2, ctx_.WeightOperand(w_.w2));
  TITAN_RETURN_IF_ERROR(GroupedGemm(counts, g_y, w2, false, 0.0f, d_h));
  TITAN_RETURN_IF_ERROR(GroupedWeightGrad(counts, g_y, r.h, w_.w2));
  // Through SwiGLU, then the gate and up projections into each assignment's token.
  const TensorView d_a = R::Reshaped(s.moe_d_a, {m * hm}), d_b = R::Reshaped(s.moe_d_b, {m * hm});
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_a));
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_b));
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.SwiGluBackward(R::Reshaped(d_h, {m * hm}), r.a, r.b, d_a, d_b));
  const TensorView d_x = R::Reshaped(s.moe_d_x, {m, d});
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_x));
  const std::pair<TensorView, int> projections[] = {{d_a, w_.w1}, {d_b, w_.w3}};
  for (const auto& [grad, weight] : projections) {
    TITAN_ASSIGN_OR_RETURN(const TensorView g,
                           ctx_.Operand(R::Reshaped(grad, {m, hm}), OperandScratch::kGrad));
    TITAN_ASSIGN_OR_RETURN(TensorView w, ctx_.WeightOperand(weight));
    TITAN_RETURN_IF_ERROR(GroupedGemm(counts, g, w, false, 1.0f, d_x));
    TITAN_RETURN_IF_ERROR(GroupedWeightGrad(counts, g, r.x, weight));
  }
  TITAN_RETURN_IF_ERROR(ctx_.compute.MoeDispatchBackward(d_x, r.slots, R::Reshaped(dx, {n, d})));
  // Through the weights into the router (the choice itself has no gradient).
  const TensorView d_logits = R::Reshaped(s.moe_d_logits, {n, moe.experts});
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.MoeRouteBackward(r.logits, r.experts, d_weights, Routing(), d_logits));
  return router_.Backward(d_logits, x, dx);
}

}  // namespace titan
