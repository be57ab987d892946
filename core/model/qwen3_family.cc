// Qwen3 as a model family (TorchTitan's qwen3 names): Llama's pre-norm blocks with an explicit
// head size, QK-norm (an RMSNorm over each query and key head before RoPE; every flavor has it,
// LlamaConfig::qk_norm), plain RoPE with
// theta 1e6, and in the MoE flavors a mixture of experts in every block: softmax scores, the top
// k experts' weights normalized, no shared expert.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/model/family_feed_forward.h"
#include "core/model/model_family.h"

namespace titan {

namespace {

// Hugging Face's Qwen3 configs: hidden_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, intermediate_size, tie_word_embeddings; head_dim 128, vocabulary 151,936.
struct DenseShape {
  const char* name;
  int64_t dim, layers, heads, kv_heads, hidden;
  bool tied;
};
constexpr DenseShape kDense[] = {
    {"0.6B", 1024, 28, 16, 8, 3072, true},  {"1.7B", 2048, 28, 16, 8, 6144, true},
    {"4B", 2560, 36, 32, 8, 9728, true},    {"8B", 4096, 36, 32, 8, 12288, false},
    {"14B", 5120, 40, 40, 8, 17408, false}, {"32B", 5120, 64, 64, 8, 25600, false}};
// And the MoE ones (num_experts 128, num_experts_per_tok 8, moe_intermediate_size).
struct MoeShape {
  const char* name;
  int64_t dim, layers, heads, kv_heads, hidden, expert_hidden;
};
constexpr MoeShape kMoe[] = {{"30B-A3B", 2048, 48, 32, 4, 6144, 768},
                             {"235B-A22B", 4096, 94, 64, 4, 12288, 1536}};

LlamaConfig Qwen3Base() {
  LlamaConfig c;
  c.vocab_size = 151936;
  c.explicit_head_dim = 128;
  c.qk_norm = true;
  c.norm_eps = 1e-6;
  c.rope.theta = 1e6;
  c.rope.scaled = false;
  return c;
}

// TorchTitan's MoEArgs defaults for Qwen3: softmax scores, normalized top-k weights, and the
// auxiliary-loss-free load balancing with coefficient 1e-3.
void SetMoe(LlamaConfig& c, int64_t experts, int64_t top_k, int64_t expert_hidden) {
  c.moe.experts = experts;
  c.moe.top_k = top_k;
  c.moe.hidden_dim = expert_hidden;
  c.moe.normalize = true;
  c.moe.load_balance_coeff = 1e-3;
}

class Qwen3 : public ModelFamily {
 public:
  std::string name() const override { return "qwen3"; }

  std::vector<std::string> flavors() const override {
    std::vector<std::string> names = {"debugmodel", "debugmodel_moe"};
    for (const DenseShape& shape : kDense) names.push_back(shape.name);
    for (const MoeShape& shape : kMoe) names.push_back(shape.name);
    return names;
  }

  absl::StatusOr<LlamaConfig> Flavor(absl::string_view flavor) const override {
    LlamaConfig c = Qwen3Base();
    // Small enough to train in tests; the head size is not dim / n_heads, as in Qwen3.
    if (flavor == "debugmodel" || flavor == "debugmodel_moe") {
      c.dim = 256, c.n_layers = 6, c.n_heads = 8, c.n_kv_heads = 4, c.explicit_head_dim = 64;
      c.explicit_hidden_dim = 768, c.vocab_size = 2048;
      if (flavor == "debugmodel_moe") SetMoe(c, 8, 2, 256);
      return c;
    }
    for (const DenseShape& s : kDense) {
      if (flavor != s.name) continue;
      c.dim = s.dim, c.n_layers = s.layers, c.n_heads = s.heads, c.n_kv_heads = s.kv_heads;
      c.explicit_hidden_dim = s.hidden, c.tie_embeddings = s.tied;
      return c;
    }
    for (const MoeShape& s : kMoe) {
      if (flavor != s.name) continue;
      c.dim = s.dim, c.n_layers = s.layers, c.n_heads = s.heads, c.n_kv_heads = s.kv_heads;
      c.explicit_hidden_dim = s.hidden;
      SetMoe(c, 128, 8, s.expert_hidden);
      return c;
    }
    return UnknownFlavor(*this, flavor);
  }

  FamilyParameters Declare(const LlamaConfig& c, int64_t tp) const override {
    const int64_t d = c.dim, hd = c.head_dim(), v = c.vocab_size / tp;
    const int64_t qd = c.n_heads / tp * hd, kvd = c.n_kv_heads / tp * hd;
    using Style = TensorParallelStyle;
    // Llama's initialization (TorchTitan's qwen3 keeps it); the experts as TorchTitan's
    // GroupedExperts: w1 std 0.02, w2 and w3 and the router depth-scaled.
    const ParameterInit ones;
    const auto normal = TruncatedNormal;
    const double output_std = 1.0 / std::sqrt(static_cast<double>(d));
    FamilyParameters family;
    family.embedding = {{"tok_embeddings.weight",
                         {v, d},
                         Style::kVocabParallelEmbedding,
                         false,
                         normal(c.tie_embeddings ? 0.02 : 1.0, -INFINITY, INFINITY)}};
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const ParameterInit in = normal(0.02, -2.0, 2.0);
      const ParameterInit out = normal(0.02 / std::sqrt(2.0 * (l + 1)), -2.0, 2.0);
      // In the order MakeBlock reads them.
      std::vector<ParameterDecl> weights = {
          {"attention_norm.weight", {d}, Style::kReplicate, false, ones},
          {"attention.wq.weight", {qd, d}, Style::kColumnwise, true, in},
          {"attention.wk.weight", {kvd, d}, Style::kColumnwise, true, in},
          {"attention.wv.weight", {kvd, d}, Style::kColumnwise, true, in},
          {"attention.wo.weight", {d, qd}, Style::kRowwise, true, out}};
      if (c.qk_norm) {
        weights.insert(weights.end(),
                       {{"attention.q_norm.weight", {hd}, Style::kReplicate, false, ones},
                        {"attention.k_norm.weight", {hd}, Style::kReplicate, false, ones}});
      }
      weights.push_back({"ffn_norm.weight", {d}, Style::kReplicate, false, ones});
      DeclareFeedForward(c, l, tp, in, out, weights);
      for (ParameterDecl& w : weights) w.name = absl::StrCat("layers.", l, ".", w.name);
      family.blocks.push_back(std::move(weights));
    }
    family.head = {{"norm.weight", {d}, Style::kReplicate, false, ones}};
    if (!c.tie_embeddings) {
      family.head.push_back({"output.weight",
                             {v, d},
                             Style::kColumnwise,
                             true,
                             normal(output_std, -3 * output_std, 3 * output_std)});
    }
    return family;
  }

  std::unique_ptr<DecoderBlock> MakeBlock(ModuleContext& context, int64_t layer,
                                          const std::vector<int>& w,
                                          BlockPolicy policy) const override {
    AttentionWeights attention{w[1], w[2], w[3], w[4]};
    size_t next = 5;
    if (context.config.qk_norm) attention.q_norm = w[next++], attention.k_norm = w[next++];
    const int ffn_norm = w[next++];
    std::unique_ptr<FeedForwardLayer> feed_forward = MakeFeedForward(context, layer, w, next);
    return std::make_unique<DecoderBlock>(context, w[0], attention, ffn_norm,
                                          std::move(feed_forward), policy);
  }
};

}  // namespace

const ModelFamily& Qwen3Family() {
  static const Qwen3 family;
  return family;
}

}  // namespace titan
