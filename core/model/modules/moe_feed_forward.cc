#include "core/model/modules/moe_feed_forward.h"

#include <algorithm>
#include <cmath>

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

// The float8 converter when it converts this expert weight, else null. Each rank scales its own
// rows of each expert, as torchao's grouped GEMM does (expert and context parallelism split the
// rows); under tensor parallelism the scales of a row split over the tp ranks cover the whole row,
// as a dense linear's (Float8Split).
Float8Linears* Float8Experts(const ModuleContext& ctx, int weight) {
  return ctx.float8 != nullptr && ctx.float8->Converts(weight) ? ctx.float8 : nullptr;
}

// A token's router scores from its logits [experts], on the host: sigmoids, or the softmax.
void HostScores(const float* logits, int64_t experts, bool sigmoid, float* scores) {
  if (sigmoid) {
    for (int64_t x = 0; x < experts; ++x) scores[x] = 1.0f / (1.0f + std::exp(-logits[x]));
    return;
  }
  const float most = *std::max_element(logits, logits + experts);
  float sum = 0;
  for (int64_t x = 0; x < experts; ++x) sum += scores[x] = std::exp(logits[x] - most);
  for (int64_t x = 0; x < experts; ++x) scores[x] /= sum;
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
  const int64_t m = n * k, rows = ctx_.expert_rows(), ep = ctx_.ep_size();
  const int64_t hm = ctx_.local().expert_hidden;
  const DType dtype = ctx_.matmul_dtype;
  RoutedActs& r = acts.routed;
  slots.push_back({&r.logits, "router_logits", {n, e}, DType::kF32, BlockStage::kGateUp});
  slots.push_back({&r.experts, "routed_experts", {n, k}, DType::kI32, BlockStage::kGateUp});
  slots.push_back({&r.weights, "routed_weights", {n, k}, DType::kF32, BlockStage::kGateUp});
  slots.push_back({&r.slots, "routed_slots", {m}, DType::kI32, BlockStage::kGateUp});
  slots.push_back({&r.counts, "routed_counts", {e}, DType::kI32, BlockStage::kGateUp});
  slots.push_back({&r.x, "routed_x", {m, d}, dtype, BlockStage::kGateUp});
  slots.push_back({&r.a, "routed_a", {rows * hm}, DType::kF32, BlockStage::kGateUp});
  slots.push_back({&r.b, "routed_b", {rows * hm}, DType::kF32, BlockStage::kGateUp});
  slots.push_back({&r.h, "routed_h", {rows, hm}, dtype, BlockStage::kSwiGlu});
  slots.push_back({&r.y, "routed_y", {m, d}, DType::kF32, BlockStage::kSwiGlu});
  if (ep > 1) {
    slots.push_back(
        {&r.recv_counts, "routed_recv_counts", {ep, e / ep}, DType::kI32, BlockStage::kGateUp});
    slots.push_back({&r.recv_x, "routed_recv_x", {rows, d}, dtype, BlockStage::kGateUp});
    slots.push_back({&r.recv_y, "routed_recv_y", {rows, d}, DType::kF32, BlockStage::kSwiGlu});
  }
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

absl::StatusOr<std::vector<MoeFeedForward::Block>> MoeFeedForward::Blocks(
    const RoutedActs& acts) const {
  std::vector<Block> blocks;
  if (ctx_.ep_size() == 1) {
    TITAN_ASSIGN_OR_RETURN(const std::vector<int32_t> counts, Counts(acts));
    for (size_t e = 0; e < counts.size(); ++e)
      blocks.push_back({static_cast<int64_t>(e), counts[e]});
    return blocks;
  }
  const int64_t local = acts.recv_counts.shape[1];
  std::vector<int32_t> received(static_cast<size_t>(acts.recv_counts.numel()));
  TITAN_RETURN_IF_ERROR(ctx_.compute.CopyToHost(acts.recv_counts, received.data()));
  for (size_t i = 0; i < received.size(); ++i) {
    blocks.push_back({static_cast<int64_t>(i) % local, received[i]});
  }
  return blocks;
}

absl::StatusOr<MoeFeedForward::Routes> MoeFeedForward::RoutesOf(const RoutedActs& acts) const {
  const int ep = ctx_.ep_size();
  const int64_t local = ctx_.config.moe.experts / ep;
  TITAN_ASSIGN_OR_RETURN(const std::vector<int32_t> counts, Counts(acts));
  TITAN_ASSIGN_OR_RETURN(const std::vector<Block> blocks, Blocks(acts));
  Routes routes{std::vector<int64_t>(ep, 0), std::vector<int64_t>(ep, 0)};
  for (size_t e = 0; e < counts.size(); ++e) routes.sent[e / local] += counts[e];
  for (size_t i = 0; i < blocks.size(); ++i) routes.received[i / local] += blocks[i].rows;
  return routes;
}

absl::Status MoeFeedForward::Travel(const RoutedActs& acts, const TensorView& mine,
                                    const TensorView& theirs, bool back) const {
  TITAN_ASSIGN_OR_RETURN(Routes routes, RoutesOf(acts));
  const int64_t width = mine.shape[1];
  for (std::vector<int64_t>* rows : {&routes.sent, &routes.received}) {
    for (int64_t& count : *rows) count *= width;
  }
  const TensorView flat_mine = R::Reshaped(mine, {mine.numel()});
  const TensorView flat_theirs = R::Reshaped(theirs, {theirs.numel()});
  return back ? ctx_.ep->AllToAll(flat_theirs, routes.received, flat_mine, routes.sent)
              : ctx_.ep->AllToAll(flat_mine, routes.sent, flat_theirs, routes.received);
}

absl::Status MoeFeedForward::GroupedGemm(const std::vector<Block>& blocks, const TensorView& in,
                                         int weight, const TensorView& w, bool transpose_w,
                                         float beta, const TensorView& out) const {
  Float8Linears* float8 = Float8Experts(ctx_, weight);
  // w1 and w3 split by their rows (column-parallel) under tp, w2 by its columns (row-parallel).
  const Float8Split split{weight == w_.w2, ctx_.tp.communicator(), nullptr};
  std::vector<GemmGroup> groups;
  int64_t first = 0;
  for (const Block& block : blocks) {
    if (block.rows == 0) continue;
    const TensorView rows = Rows(in, first, block.rows), rows_out = Rows(out, first, block.rows);
    first += block.rows;
    if (float8 == nullptr) {
      groups.push_back({rows, Expert(w, block.expert), rows_out});
      continue;
    }
    const Float8Operand expert{Expert(w, block.expert), {}, {}};
    TITAN_RETURN_IF_ERROR(transpose_w
                              ? float8->Forward(rows, expert, rows_out, beta != 0.0f, split)
                              : float8->InputGrad(rows, expert, rows_out, split, beta != 0.0f));
  }
  if (groups.empty()) return absl::OkStatus();
  return ctx_.compute.GroupedGemm(groups, false, transpose_w, 1.0f, beta);
}

absl::Status MoeFeedForward::GroupedWeightGrad(const std::vector<Block>& blocks,
                                               const TensorView& g, const TensorView& in,
                                               int weight) const {
  const TensorView grad = ctx_.Grad(weight);
  // An expert's rows come in one block per source rank under expert parallelism, every block
  // adding into the expert's gradient.
  const size_t experts = static_cast<size_t>(grad.shape[0]);
  if (Float8Linears* float8 = Float8Experts(ctx_, weight)) {
    std::vector<std::vector<TensorView>> g_rows(experts), in_rows(experts);
    int64_t first = 0;
    for (const Block& block : blocks) {
      if (block.rows == 0) continue;
      g_rows[block.expert].push_back(Rows(g, first, block.rows));
      in_rows[block.expert].push_back(Rows(in, first, block.rows));
      first += block.rows;
    }
    for (size_t e = 0; e < experts; ++e) {
      if (g_rows[e].empty()) continue;
      TITAN_RETURN_IF_ERROR(
          float8->GroupedWeightGrad(g_rows[e], in_rows[e], Expert(grad, static_cast<int64_t>(e))));
    }
    return absl::OkStatus();
  }
  // Round r takes each expert's r-th block, so no two groups of a call add into one gradient:
  // one grouped GEMM per round (one in all without ep), each expert's blocks added in order.
  std::vector<std::vector<GemmGroup>> rounds;
  std::vector<size_t> taken(experts, 0);
  int64_t first = 0;
  for (const Block& block : blocks) {
    if (block.rows == 0) continue;
    size_t& round = taken[static_cast<size_t>(block.expert)];
    if (rounds.size() <= round) rounds.emplace_back();
    rounds[round++].push_back(
        {Rows(g, first, block.rows), Rows(in, first, block.rows), Expert(grad, block.expert)});
    first += block.rows;
  }
  for (const std::vector<GemmGroup>& groups : rounds) {
    TITAN_RETURN_IF_ERROR(ctx_.compute.GroupedGemm(groups, true, false, 1.0f, 1.0f));
  }
  return absl::OkStatus();
}

absl::Status MoeFeedForward::RouteRoundRobin(const RoutedActs& acts) const {
  const MoeRouting routing = Routing();
  const int64_t n = ctx_.n, e = ctx_.config.moe.experts, k = routing.top_k;
  std::vector<float> logits(static_cast<size_t>(n * e)), scores(static_cast<size_t>(e));
  std::vector<float> weights(static_cast<size_t>(n * k));
  std::vector<int32_t> experts(static_cast<size_t>(n * k));
  TITAN_RETURN_IF_ERROR(ctx_.compute.CopyToHost(acts.logits, logits.data()));
  for (int64_t t = 0; t < n; ++t) {
    HostScores(logits.data() + t * e, e, routing.score == MoeRouting::Score::kSigmoid,
               scores.data());
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t at = t * k + j;
      experts[at] = static_cast<int32_t>(at % e);
      sum += weights[at] = scores[experts[at]];
    }
    for (int64_t j = 0; j < k; ++j) {
      float& weight = weights[t * k + j];
      if (routing.normalize) weight /= sum + 1e-20f;
      weight *= routing.scale;
    }
  }
  TITAN_RETURN_IF_ERROR(ctx_.compute.CopyFromHost(experts.data(), acts.experts));
  return ctx_.compute.CopyFromHost(weights.data(), acts.weights);
}

absl::Status MoeFeedForward::AddAuxLoss(const RoutedActs& acts, const TensorView& d_logits) {
  const MoeConfig& moe = ctx_.config.moe;
  const int64_t n = ctx_.n, e = moe.experts, k = moe.top_k, batch = ctx_.batch;
  const int64_t local = n / batch;  // this rank's tokens of each sequence
  std::vector<float> logits(static_cast<size_t>(n * e)), scores(logits.size());
  std::vector<int32_t> chosen(static_cast<size_t>(n * k));
  TITAN_RETURN_IF_ERROR(ctx_.compute.CopyToHost(acts.logits, logits.data()));
  TITAN_RETURN_IF_ERROR(ctx_.compute.CopyToHost(acts.experts, chosen.data()));
  for (int64_t t = 0; t < n; ++t) {
    HostScores(logits.data() + t * e, e, moe.sigmoid, scores.data() + t * e);
  }
  // Per sequence: each expert's choices, and its normalized scores' sum; over the whole sequence
  // when context parallelism holds the rest of it on other ranks.
  std::vector<float> sums(static_cast<size_t>(batch * 2 * e), 0.0f);
  for (int64_t t = 0; t < n; ++t) {
    float* choices = sums.data() + (t / local) * 2 * e;
    float* mass = choices + e;
    const float* s = scores.data() + t * e;
    float total = 0;
    for (int64_t x = 0; x < e; ++x) total += s[x];
    for (int64_t x = 0; x < e; ++x) mass[x] += s[x] / total;
    for (int64_t j = 0; j < k; ++j) choices[chosen[t * k + j]] += 1.0f;
  }
  Communicator* sequence = ctx_.attention->sequence_group();
  const int cp = sequence != nullptr ? sequence->size() : 1;
  const TensorView scratch = R::Reshaped(ctx_.scratch.moe_aux_d_logits, {n, e});
  if (cp > 1) {  // through the device, where the communicator reduces
    const TensorView summed =
        R::Reshaped(ctx_.scratch.moe_aux_d_logits, {static_cast<int64_t>(sums.size())});
    TITAN_RETURN_IF_ERROR(ctx_.compute.CopyFromHost(sums.data(), summed));
    TITAN_RETURN_IF_ERROR(sequence->AllReduce(summed, ReduceOp::kSum));
    TITAN_RETURN_IF_ERROR(ctx_.compute.CopyToHost(summed, sums.data()));
  }
  const double alpha = moe.aux_loss_alpha, tokens = static_cast<double>(local * cp);
  // f_i = experts / (k T) x choices_i, P_i = mass_i / T; the loss alpha sum_i f_i P_i, averaged
  // over the sequences.
  double loss = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const float* choices = sums.data() + b * 2 * e;
    for (int64_t x = 0; x < e; ++x) {
      loss += static_cast<double>(e) / (k * tokens) * choices[x] * choices[e + x] / tokens;
    }
  }
  aux_loss_ += alpha * loss / static_cast<double>(batch);
  // Its gradient: d/d(normalized score of i at t) = alpha / batch x f_i / T, then through the
  // normalization and the scores into the logits. Under tensor parallelism the logits' gradient
  // is summed over the ranks (the router's gradient, and the input's through the norm), so one
  // rank adds it; under context parallelism the ranks' gradients are averaged, so each adds cp
  // times its share.
  std::vector<float> d(static_cast<size_t>(n * e), 0.0f);
  if (ctx_.tp.size() == 1 || ctx_.tp.rank() == 0) {
    std::vector<double> g(static_cast<size_t>(e));
    for (int64_t t = 0; t < n; ++t) {
      const float* choices = sums.data() + (t / local) * 2 * e;
      const float* s = scores.data() + t * e;
      double total = 0, g_dot_normalized = 0;
      for (int64_t x = 0; x < e; ++x) total += s[x];
      for (int64_t x = 0; x < e; ++x) {
        g[x] = alpha * cp / batch * (static_cast<double>(e) / (k * tokens) * choices[x]) / tokens;
        g_dot_normalized += g[x] * s[x] / total;
      }
      float* out = d.data() + t * e;
      if (moe.sigmoid) {
        for (int64_t x = 0; x < e; ++x) {
          const double d_score = (g[x] - g_dot_normalized) / total;
          out[x] = static_cast<float>(d_score * s[x] * (1.0 - s[x]));
        }
      } else {
        for (int64_t x = 0; x < e; ++x)
          out[x] = static_cast<float>(s[x] * (g[x] - g_dot_normalized));
      }
    }
  }
  TITAN_RETURN_IF_ERROR(ctx_.compute.CopyFromHost(d.data(), scratch));
  return ctx_.compute.Accumulate(scratch, d_logits);
}

absl::Status MoeFeedForward::GateUp(const TensorView& x, const FeedForwardActs& acts) {
  const MoeConfig& moe = ctx_.config.moe;
  const int64_t n = ctx_.n, d = ctx_.config.dim, hm = ctx_.local().expert_hidden;
  const RoutedActs& r = acts.routed;
  TITAN_RETURN_IF_ERROR(router_.Forward(x, r.logits));
  const TensorView bias = w_.bias >= 0 ? ctx_.Value(w_.bias) : TensorView{};
  if (moe.force_balance) {
    TITAN_RETURN_IF_ERROR(RouteRoundRobin(r));
  } else {
    TITAN_RETURN_IF_ERROR(ctx_.compute.MoeRoute(r.logits, bias, Routing(), r.experts, r.weights));
  }
  TITAN_RETURN_IF_ERROR(ctx_.compute.MoePermute(r.experts, r.counts, r.slots));
  TITAN_RETURN_IF_ERROR(ctx_.compute.MoeDispatch(R::Reshaped(x, {n, d}), r.slots, r.x));
  const int ep = ctx_.ep_size();
  if (ep > 1) {
    // Each ep rank learns how many rows it gets for each of its experts, then gets them.
    const std::vector<int64_t> each(ep, moe.experts / ep);
    TITAN_RETURN_IF_ERROR(
        ctx_.ep->AllToAll(r.counts, each, R::Reshaped(r.recv_counts, {moe.experts}), each));
    TITAN_RETURN_IF_ERROR(Travel(r, r.x, r.recv_x, /*back=*/false));
  }
  TITAN_ASSIGN_OR_RETURN(const std::vector<Block> blocks, Blocks(r));
  const TensorView& rows = ep > 1 ? r.recv_x : r.x;
  const int64_t capacity = ctx_.expert_rows();
  // w1's operand is spent before w3's takes the same scratch.
  TITAN_ASSIGN_OR_RETURN(TensorView w1, ctx_.WeightOperand(w_.w1));
  TITAN_RETURN_IF_ERROR(
      GroupedGemm(blocks, rows, w_.w1, w1, true, 0.0f, R::Reshaped(r.a, {capacity, hm})));
  TITAN_ASSIGN_OR_RETURN(TensorView w3, ctx_.WeightOperand(w_.w3));
  TITAN_RETURN_IF_ERROR(
      GroupedGemm(blocks, rows, w_.w3, w3, true, 0.0f, R::Reshaped(r.b, {capacity, hm})));
  return shared_ != nullptr ? shared_->GateUp(x, acts) : absl::OkStatus();
}

absl::Status MoeFeedForward::SwiGlu(const FeedForwardActs& acts) {
  const int64_t hm = ctx_.local().expert_hidden;
  const RoutedActs& r = acts.routed;
  TITAN_ASSIGN_OR_RETURN(const std::vector<Block> blocks, Blocks(r));
  int64_t total = 0;
  for (const Block& block : blocks) total += block.rows;
  // r.h in the matmul dtype: a bf16 one rounded once from the f32 product.
  TITAN_RETURN_IF_ERROR(ctx_.compute.SwiGluForward(R::Reshaped(r.a, {total * hm}),
                                                   R::Reshaped(r.b, {total * hm}),
                                                   R::Reshaped(r.h, {total, hm})));
  TITAN_ASSIGN_OR_RETURN(TensorView w2, ctx_.WeightOperand(w_.w2));
  const bool ep = ctx_.ep_size() > 1;
  TITAN_RETURN_IF_ERROR(GroupedGemm(blocks, r.h, w_.w2, w2, true, 0.0f, ep ? r.recv_y : r.y));
  // The outputs go back to their tokens' ranks here, so that the stage's activations are whole.
  if (ep) TITAN_RETURN_IF_ERROR(Travel(r, r.y, r.recv_y, /*back=*/true));
  return shared_ != nullptr ? shared_->SwiGlu(acts) : absl::OkStatus();
}

absl::Status MoeFeedForward::AddOutput(const FeedForwardActs& acts, const TensorView& out) {
  const RoutedActs& r = acts.routed;
  const int64_t n = ctx_.n, nl = ctx_.n_local, d = ctx_.config.dim;
  if (ctx_.tp.size() == 1) {
    TITAN_RETURN_IF_ERROR(
        ctx_.compute.MoeCombine(r.y, r.weights, r.slots, R::Reshaped(out, {n, d})));
    return shared_ != nullptr ? shared_->AddOutput(acts, out) : absl::OkStatus();
  }
  // Under tensor parallelism each rank's outputs are partial sums over its part of the hidden
  // features: the routed and shared experts' are added up for every token, then summed over the
  // ranks and scattered to the tokens' ranks at once.
  const TensorView full = R::Reshaped(ctx_.scratch.tokens_full, {n, d});
  TITAN_RETURN_IF_ERROR(ctx_.Zero(full));
  TITAN_RETURN_IF_ERROR(ctx_.compute.MoeCombine(r.y, r.weights, r.slots, full));
  if (shared_ != nullptr) TITAN_RETURN_IF_ERROR(shared_->AddPartialOutput(acts, full));
  TITAN_ASSIGN_OR_RETURN(
      const TensorView reduced,
      ctx_.tp.ReduceScatterTokens(R::Reshaped(full, {n * d}),
                                  R::Reshaped(ctx_.scratch.tokens_local, {nl * d})));
  return ctx_.compute.Accumulate(reduced, R::Reshaped(out, {nl * d}));
}

absl::Status MoeFeedForward::Backward(const TensorView& d_out, const TensorView& x,
                                      const FeedForwardActs& acts, const TensorView& dx) {
  if (ctx_.deferring != nullptr) {
    return absl::UnimplementedError(
        "model: a mixture of experts does not split its backward into input and weight passes; "
        "use a pipeline schedule without the zero-bubble split (not ZBVZeroBubble, "
        "Interleaved ZB or DualPipeV)");
  }
  // Its first reader of d_out is no linear layer, so an async gather runs whole first.
  TITAN_RETURN_IF_ERROR(ctx_.FinishGather());
  const MoeConfig& moe = ctx_.config.moe;
  const int64_t n = ctx_.n, d = ctx_.config.dim, k = moe.top_k, m = n * k;
  const int64_t hm = ctx_.local().expert_hidden;
  const RoutedActs& r = acts.routed;
  const SharedScratch& s = ctx_.scratch;
  const bool ep = ctx_.ep_size() > 1;
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
  TITAN_ASSIGN_OR_RETURN(const std::vector<Block> blocks, Blocks(r));
  int64_t total = 0;
  for (const Block& block : blocks) total += block.rows;
  // Under expert parallelism the outputs' gradients travel to the experts' ranks as the rows did.
  const TensorView d_rows_y = ep ? R::Reshaped(s.moe_recv_d_y, {total, d}) : d_y;
  const int64_t capacity = ctx_.expert_rows();
  if (ep) TITAN_RETURN_IF_ERROR(Travel(r, d_y, R::Reshaped(s.moe_recv_d_y, {capacity, d}), false));
  // Through the experts' down projections.
  const TensorView d_h = R::Reshaped(s.moe_d_h, {total, hm});
  TITAN_ASSIGN_OR_RETURN(const TensorView g_y, ctx_.Operand(d_rows_y, OperandScratch::kGrad));
  TITAN_ASSIGN_OR_RETURN(TensorView w2, ctx_.WeightOperand(w_.w2));
  TITAN_RETURN_IF_ERROR(GroupedGemm(blocks, g_y, w_.w2, w2, false, 0.0f, d_h));
  TITAN_RETURN_IF_ERROR(GroupedWeightGrad(blocks, g_y, r.h, w_.w2));
  // Through SwiGLU, then the gate and up projections into each row's token.
  const TensorView d_a = R::Reshaped(s.moe_d_a, {total * hm});
  const TensorView d_b = R::Reshaped(s.moe_d_b, {total * hm});
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_a));
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_b));
  TITAN_RETURN_IF_ERROR(ctx_.compute.SwiGluBackward(R::Reshaped(d_h, {total * hm}),
                                                    R::Reshaped(r.a, {total * hm}),
                                                    R::Reshaped(r.b, {total * hm}), d_a, d_b));
  const TensorView d_x = R::Reshaped(s.moe_d_x, {m, d});
  const TensorView d_rows_x = ep ? R::Reshaped(s.moe_recv_d_x, {total, d}) : d_x;
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_rows_x));
  const TensorView& rows = ep ? r.recv_x : r.x;
  const std::pair<TensorView, int> projections[] = {{d_a, w_.w1}, {d_b, w_.w3}};
  for (const auto& [grad, weight] : projections) {
    TITAN_ASSIGN_OR_RETURN(const TensorView g,
                           ctx_.Operand(R::Reshaped(grad, {total, hm}), OperandScratch::kGrad));
    TITAN_ASSIGN_OR_RETURN(TensorView w, ctx_.WeightOperand(weight));
    TITAN_RETURN_IF_ERROR(GroupedGemm(blocks, g, weight, w, false, 1.0f, d_rows_x));
    TITAN_RETURN_IF_ERROR(GroupedWeightGrad(blocks, g, rows, weight));
  }
  // And back to the tokens' ranks.
  if (ep) TITAN_RETURN_IF_ERROR(Travel(r, d_x, R::Reshaped(s.moe_recv_d_x, {capacity, d}), true));
  TITAN_RETURN_IF_ERROR(ctx_.compute.MoeDispatchBackward(d_x, r.slots, R::Reshaped(dx, {n, d})));
  // Through the weights into the router (the choice itself has no gradient). Under tensor
  // parallelism the outputs were partial sums, so are the weights' gradients and all that follows
  // from them: dx is summed over the ranks with the rest, the router's gradient here.
  const TensorView d_logits = R::Reshaped(s.moe_d_logits, {n, moe.experts});
  TITAN_RETURN_IF_ERROR(
      ctx_.compute.MoeRouteBackward(r.logits, r.experts, d_weights, Routing(), d_logits));
  if (moe.aux_loss_alpha > 0) TITAN_RETURN_IF_ERROR(AddAuxLoss(r, d_logits));
  return router_.BackwardOfPartialSums(d_logits, x, dx, s.moe_router_grad);
}

}  // namespace titan
