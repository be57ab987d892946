// Llama 3 as a model family: its parameters with TorchTitan's names and tensor-parallel plan,
// and its blocks.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/model/model_family.h"

namespace titan {

namespace {

class Llama : public ModelFamily {
 public:
  std::string name() const override { return "llama3"; }
  std::vector<std::string> flavors() const override {
    return {"debugmodel", "debugmodel_gqa", "debugmodel_tied", "1B", "3B", "8B", "70B", "405B"};
  }
  absl::StatusOr<LlamaConfig> Flavor(absl::string_view flavor) const override {
    absl::StatusOr<LlamaConfig> config = LlamaFlavor(flavor);
    return config.ok() ? config : UnknownFlavor(*this, flavor);
  }

  // TorchTitan's tensor-parallel plan for Llama: the projections into heads and hidden features
  // column-wise, the ones back into the residual stream row-wise, the norms replicated (sequence
  // parallel), the embedding vocabulary-parallel and the output column-wise over the vocabulary
  // (the loss then runs on the shards; a tied output is the embedding table, split the same way).
  FamilyParameters Declare(const LlamaConfig& c, int64_t tp) const override {
    const int64_t d = c.dim, hd = c.head_dim(), f = c.hidden_dim() / tp, v = c.vocab_size / tp;
    const int64_t qd = c.n_heads / tp * hd, kvd = c.n_kv_heads / tp * hd;
    using Style = TensorParallelStyle;
    // TorchTitan's initialization: norms at one; an untied embedding Normal(0, 1); the projections
    // truncated at +-2 with std 0.02, the ones back into the residual stream (wo, w2) and w3
    // scaled by depth, 0.02 / sqrt(2 (layer + 1)); the output std 1 / sqrt(dim), cut at 3 std.
    const ParameterInit ones;
    auto normal = [](double std, double low, double high) {
      return ParameterInit{ParameterInit::Kind::kTruncatedNormal, std, low, high};
    };
    const double output_std = 1.0 / std::sqrt(static_cast<double>(c.dim));
    const ParameterInit output_init = normal(output_std, -3 * output_std, 3 * output_std);
    // A tied table is also the output projection: Normal(0, 1) would make the first logits of
    // order sqrt(dim). It starts as Hugging Face's transformers start a tied model (Qwen3, Gemma):
    // Normal(0, initializer_range = 0.02), the first loss then near ln(vocab).
    FamilyParameters family;
    family.embedding = {{"tok_embeddings.weight",
                         {v, d},
                         Style::kVocabParallelEmbedding,
                         false,
                         normal(c.tie_embeddings ? 0.02 : 1.0, -INFINITY, INFINITY)}};
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const std::string prefix = absl::StrCat("layers.", l, ".");
      const ParameterInit in = normal(0.02, -2.0, 2.0);
      const ParameterInit out = normal(0.02 / std::sqrt(2.0 * (l + 1)), -2.0, 2.0);
      // In the order MakeBlock reads them.
      const ParameterDecl weights[] = {{"attention_norm", {d}, Style::kReplicate, false, ones},
                                       {"attention.wq", {qd, d}, Style::kColumnwise, true, in},
                                       {"attention.wk", {kvd, d}, Style::kColumnwise, true, in},
                                       {"attention.wv", {kvd, d}, Style::kColumnwise, true, in},
                                       {"attention.wo", {d, qd}, Style::kRowwise, true, out},
                                       {"ffn_norm", {d}, Style::kReplicate, false, ones},
                                       {"feed_forward.w1", {f, d}, Style::kColumnwise, true, in},
                                       {"feed_forward.w2", {d, f}, Style::kRowwise, true, out},
                                       {"feed_forward.w3", {f, d}, Style::kColumnwise, true, out}};
      std::vector<ParameterDecl>& block = family.blocks.emplace_back();
      for (const ParameterDecl& w : weights) {
        block.push_back({absl::StrCat(prefix, w.name, ".weight"), w.shape, w.tp_style,
                         w.matmul_weight, w.init});
      }
    }
    family.head = {{"norm.weight", {d}, Style::kReplicate, false, ones}};
    // A tied output is the embedding table, which is read in f32.
    if (!c.tie_embeddings) {
      family.head.push_back({"output.weight", {v, d}, Style::kColumnwise, true, output_init});
    }
    return family;
  }

  std::unique_ptr<DecoderBlock> MakeBlock(ModuleContext& context, int64_t /*layer*/,
                                          const std::vector<int>& w,
                                          BlockPolicy policy) const override {
    return std::make_unique<DecoderBlock>(
        context, w[0], AttentionWeights{w[1], w[2], w[3], w[4]}, w[5],
        std::make_unique<FeedForward>(context, w[6], w[7], w[8]), policy);
  }
};

}  // namespace

const ModelFamily& LlamaFamily() {
  static const Llama family;
  return family;
}

}  // namespace titan
