#include "core/model/family_feed_forward.h"

#include "core/model/modules/moe_feed_forward.h"

namespace titan {

ParameterInit TruncatedNormal(double std, double low, double high) {
  return ParameterInit{ParameterInit::Kind::kTruncatedNormal, std, low, high};
}

void DeclareFeedForward(const LlamaConfig& c, int64_t layer, int64_t tp, const ParameterInit& in,
                        const ParameterInit& out, std::vector<ParameterDecl>& weights) {
  using Style = TensorParallelStyle;
  const int64_t d = c.dim, f = c.hidden_dim() / tp;
  if (!c.IsMoeLayer(layer)) {
    weights.insert(weights.end(),
                   {{"feed_forward.w1.weight", {f, d}, Style::kColumnwise, true, in},
                    {"feed_forward.w2.weight", {d, f}, Style::kRowwise, true, out},
                    {"feed_forward.w3.weight", {f, d}, Style::kColumnwise, true, out}});
    return;
  }
  // Under tensor parallelism every rank routes every token (the router and its bias replicated)
  // and computes its part of each expert's hidden features, as the dense SwiGLU: the experts' w1
  // and w3 split by their rows (dim 1), w2 by its columns (dim 2); TorchTitan's ETP = TP.
  const ParameterInit zeros{ParameterInit::Kind::kZeros};
  const MoeConfig& m = c.moe;
  const int64_t e = m.experts, hm = m.hidden_dim / tp;
  weights.push_back({"moe.router.gate.weight", {e, d}, Style::kReplicate, true, out});
  if (m.load_balance_coeff > 0) {
    weights.push_back({"moe.expert_bias", {e}, Style::kReplicate, false, zeros, true});
  }
  // Routed experts: expert parallelism splits their dim 0 (ParameterDecl::expert).
  weights.insert(weights.end(),
                 {{"moe.experts.w1", {e, hm, d}, Style::kColumnwise, true, in, false, true},
                  {"moe.experts.w2", {e, d, hm}, Style::kRowwise, true, out, false, true},
                  {"moe.experts.w3", {e, hm, d}, Style::kColumnwise, true, out, false, true}});
  if (m.shared_experts > 0) {
    const int64_t hs = m.shared_experts * hm;
    weights.insert(weights.end(),
                   {{"moe.shared_experts.w1.weight", {hs, d}, Style::kColumnwise, true, in},
                    {"moe.shared_experts.w2.weight", {d, hs}, Style::kRowwise, true, out},
                    {"moe.shared_experts.w3.weight", {hs, d}, Style::kColumnwise, true, out}});
  }
}

std::unique_ptr<FeedForwardLayer> MakeFeedForward(ModuleContext& context, int64_t layer,
                                                  const std::vector<int>& w, size_t& next) {
  if (!context.config.IsMoeLayer(layer)) {
    next += 3;
    return std::make_unique<FeedForward>(context, w[next - 3], w[next - 2], w[next - 1]);
  }
  const MoeConfig& m = context.config.moe;
  MoeWeights moe;
  moe.router = w[next++];
  if (m.load_balance_coeff > 0) moe.bias = w[next++];
  moe.w1 = w[next++], moe.w2 = w[next++], moe.w3 = w[next++];
  if (m.shared_experts > 0) {
    moe.shared_w1 = w[next++], moe.shared_w2 = w[next++], moe.shared_w3 = w[next++];
  }
  return std::make_unique<MoeFeedForward>(context, moe);
}

}  // namespace titan
