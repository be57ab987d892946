// DeepSeek-V3 as a model family (TorchTitan's deepseek_v3 names and flavors): pre-norm blocks of
// multi-head latent attention (modules/latent_attention.h) with decoupled, YaRN-scaled RoPE, and
// after the first dense_layers dense blocks a mixture of experts with shared experts, the
// router's scores sigmoid (671B) or softmax (16B), node-limited group routing and a route scale.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/model/family_feed_forward.h"
#include "core/model/model_family.h"
#include "core/model/modules/latent_attention.h"

namespace titan {

namespace {

// TorchTitan's deepseek_v3 flavors' shared settings: RoPE theta 10,000 with YaRN (factor 40 over
// 4,096 positions, beta_fast 32, beta_slow 1), auxiliary-loss-free load balancing.
LlamaConfig DeepSeekV3Base() {
  LlamaConfig c;
  c.norm_eps = 1e-5;
  c.rope.theta = 10000;
  c.rope.scaled = false;
  c.yarn.factor = 40, c.yarn.original_seq_len = 4096, c.yarn.beta_fast = 32, c.yarn.beta_slow = 1;
  c.moe.load_balance_coeff = 1e-3;
  return c;
}

// What sets one flavor apart (TorchTitan's deepseek_v3 flavors; the debug model small enough to
// train on a CPU in seconds, with every part of the large flavors: a dense first block, low-rank
// queries, values narrower than queries and keys, sigmoid scores routed within 2 of 4 groups,
// shared experts, a route scale).
struct Shape {
  const char* name;
  int64_t dim, layers, heads, vocab, dense_hidden, dense_layers;
  int64_t q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim;
  double mscale;
  int64_t experts, top_k, expert_hidden, shared_experts, groups, groups_chosen;
  bool sigmoid, normalize;
  double route_scale;
};
// clang-format off
constexpr Shape kShapes[] = {
  // name          dim  layers heads vocab  dense  dl  q_lr  kv_lr nope rope v   mscale
  //   experts top_k hidden shared groups chosen sigmoid normalize scale
  {"debugmodel",   256,  6,    8,  2048,    768, 1,  128, 128,  32, 16,  32, 0.70,
     8,   3,  256, 2, 4, 2, true,  true,  2.5},
  {"16B",         2048, 27,   16, 102400, 10944, 1,    0, 512, 128, 64, 128, 0.70,
    64,   6, 1408, 2, 1, 1, false, false, 1.0},
  {"671B",        7168, 61,  128, 129280, 18432, 3, 1536, 512, 128, 64, 128, 1.0,
   256,   8, 2048, 1, 8, 4, true,  true,  2.5}};
// clang-format on

void SetShape(LlamaConfig& c, const Shape& s) {
  c.dim = s.dim, c.n_layers = s.layers, c.n_heads = s.heads, c.n_kv_heads = s.heads;
  c.vocab_size = s.vocab, c.explicit_hidden_dim = s.dense_hidden;
  LatentAttentionConfig& a = c.mla;
  a.q_lora_rank = s.q_lora_rank, a.kv_lora_rank = s.kv_lora_rank;
  a.qk_nope_head_dim = s.qk_nope_head_dim, a.qk_rope_head_dim = s.qk_rope_head_dim;
  a.v_head_dim = s.v_head_dim;
  c.explicit_head_dim = a.qk_head_dim();
  c.yarn.mscale = s.mscale;
  MoeConfig& m = c.moe;
  m.experts = s.experts, m.top_k = s.top_k, m.hidden_dim = s.expert_hidden;
  m.shared_experts = s.shared_experts, m.dense_layers = s.dense_layers;
  m.groups = s.groups, m.groups_chosen = s.groups_chosen;
  m.sigmoid = s.sigmoid, m.normalize = s.normalize, m.route_scale = s.route_scale;
}

class DeepSeekV3 : public ModelFamily {
 public:
  std::string name() const override { return "deepseek_v3"; }

  std::vector<std::string> flavors() const override {
    std::vector<std::string> names;
    for (const Shape& shape : kShapes) names.push_back(shape.name);
    names.insert(names.begin() + 1, "debugmodel_plain_q");
    return names;
  }

  absl::StatusOr<LlamaConfig> Flavor(absl::string_view flavor) const override {
    // The debug model with plain queries (q_lora_rank 0, as 16B).
    const bool plain_q = flavor == "debugmodel_plain_q";
    for (const Shape& s : kShapes) {
      if (flavor != s.name && !(plain_q && s.name == std::string_view("debugmodel"))) continue;
      LlamaConfig c = DeepSeekV3Base();
      SetShape(c, s);
      if (plain_q) c.mla.q_lora_rank = 0;
      return c;
    }
    return UnknownFlavor(*this, flavor);
  }

  // Tensor parallelism refuses latent attention and experts (CheckTensorParallelDegree): all but
  // the embedding and output are whole on every rank.
  FamilyParameters Declare(const LlamaConfig& c, int64_t tp) const override {
    const LatentAttentionConfig& a = c.mla;
    const int64_t d = c.dim, h = c.n_heads, v = c.vocab_size / tp;
    const int64_t q = h * a.qk_head_dim(), ql = a.q_lora_rank, kvl = a.kv_lora_rank;
    using Style = TensorParallelStyle;
    constexpr Style kWhole = Style::kReplicate;
    // TorchTitan's deepseek_v3 initialization: norms at one, the embedding Normal(0, 1), every
    // projection truncated at +-2 with std 0.02 but wo, w2, w3, the router and the experts' w2
    // and w3 scaled by depth, 0.02 / sqrt(2 (layer + 1)); the output std 1 / sqrt(dim) cut at 3
    // std.
    const ParameterInit ones;
    const double output_std = 1.0 / std::sqrt(static_cast<double>(d));
    FamilyParameters family;
    family.embedding = {{"tok_embeddings.weight",
                         {v, d},
                         Style::kVocabParallelEmbedding,
                         false,
                         TruncatedNormal(1.0, -INFINITY, INFINITY)}};
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const ParameterInit in = TruncatedNormal(0.02, -2.0, 2.0);
      const ParameterInit out = TruncatedNormal(0.02 / std::sqrt(2.0 * (l + 1)), -2.0, 2.0);
      // In the order MakeBlock reads them.
      std::vector<ParameterDecl> weights = {{"attention_norm.weight", {d}, kWhole, false, ones}};
      if (ql > 0) {
        weights.insert(weights.end(), {{"attention.wq_a.weight", {ql, d}, kWhole, true, in},
                                       {"attention.q_norm.weight", {ql}, kWhole, false, ones},
                                       {"attention.wq_b.weight", {q, ql}, kWhole, true, in}});
      } else {
        weights.push_back({"attention.wq.weight", {q, d}, kWhole, true, in});
      }
      const int64_t kv = h * (a.qk_nope_head_dim + a.v_head_dim);
      weights.insert(weights.end(),
                     {{"attention.wkv_a.weight", {kvl + a.qk_rope_head_dim, d}, kWhole, true, in},
                      {"attention.kv_norm.weight", {kvl}, kWhole, false, ones},
                      {"attention.wkv_b.weight", {kv, kvl}, kWhole, true, in},
                      {"attention.wo.weight", {d, h * a.v_head_dim}, kWhole, true, out},
                      {"ffn_norm.weight", {d}, kWhole, false, ones}});
      DeclareFeedForward(c, l, tp, in, out, weights);
      for (ParameterDecl& w : weights) w.name = absl::StrCat("layers.", l, ".", w.name);
      family.blocks.push_back(std::move(weights));
    }
    family.head = {{"norm.weight", {d}, kWhole, false, ones},
                   {"output.weight",
                    {v, d},
                    Style::kColumnwise,
                    true,
                    TruncatedNormal(output_std, -3 * output_std, 3 * output_std)}};
    return family;
  }

  std::unique_ptr<DecoderBlock> MakeBlock(ModuleContext& context, int64_t layer,
                                          const std::vector<int>& w,
                                          BlockPolicy policy) const override {
    LatentAttentionWeights attention;
    size_t next = 1;
    if (context.config.mla.q_lora_rank > 0) {
      attention.wq_a = w[next++], attention.q_norm = w[next++], attention.wq_b = w[next++];
    } else {
      attention.wq = w[next++];
    }
    attention.wkv_a = w[next++], attention.kv_norm = w[next++], attention.wkv_b = w[next++];
    attention.wo = w[next++];
    const int ffn_norm = w[next++];
    std::unique_ptr<FeedForwardLayer> feed_forward = MakeFeedForward(context, layer, w, next);
    return std::make_unique<DecoderBlock>(context, w[0],
                                          std::make_unique<LatentAttention>(context, attention),
                                          ffn_norm, std::move(feed_forward), policy);
  }
};

}  // namespace

const ModelFamily& DeepSeekV3Family() {
  static const DeepSeekV3 family;
  return family;
}

}  // namespace titan
