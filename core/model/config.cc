#include "core/model/config.h"

#include <charconv>
#include <cmath>
#include <span>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace titan {
namespace {

// The shortest text that reads back as the same double: metadata values compare exactly.
std::string NumberText(double value) {
  char buffer[32];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof(buffer), value).ptr);
}

}  // namespace

int64_t LlamaConfig::hidden_dim() const {
  if (explicit_hidden_dim > 0) return explicit_hidden_dim;
  int64_t hidden = 2 * (4 * dim) / 3;
  if (ffn_dim_multiplier > 0) hidden = static_cast<int64_t>(ffn_dim_multiplier * hidden);
  return multiple_of * ((hidden + multiple_of - 1) / multiple_of);
}

namespace {

// A block's parameters, the routed experts' counted `routed` of experts times (all of them, or
// top_k for the active count).
// Latent attention's: the queries' projections (and norm), wkv_a, kv_norm, wkv_b, wo.
int64_t LatentAttentionParameters(const LlamaConfig& c) {
  const LatentAttentionConfig& a = c.mla;
  const int64_t q = c.n_heads * a.qk_head_dim(), r = a.q_lora_rank;
  const int64_t queries = r > 0 ? c.dim * r + r + r * q : c.dim * q;
  return queries + c.dim * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank +
         a.kv_lora_rank * c.n_heads * (a.qk_nope_head_dim + a.v_head_dim) +
         c.n_heads * a.v_head_dim * c.dim;
}

int64_t BlockParameters(const LlamaConfig& c, int64_t layer, int64_t routed) {
  const int64_t hd = c.head_dim(), qd = c.n_heads * hd, kvd = c.n_kv_heads * hd;
  const int64_t attention = c.mla.enabled()
                                ? LatentAttentionParameters(c)
                                : 2 * c.dim * qd + 2 * c.dim * kvd + (c.qk_norm ? 2 * hd : 0);
  const int64_t norms = 2 * c.dim;
  if (!c.IsMoeLayer(layer)) return attention + norms + 3 * c.dim * c.hidden_dim();
  const MoeConfig& m = c.moe;
  // The experts' bias is a buffer, not counted (as TorchTitan's and Hugging Face's counts).
  const int64_t router = m.experts * c.dim;
  return attention + norms + router + 3 * c.dim * m.hidden_dim * (routed + m.shared_experts);
}

int64_t CountParameters(const LlamaConfig& c, bool active) {
  int64_t total = (c.tie_embeddings ? 1 : 2) * c.vocab_size * c.dim + c.dim;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    total += BlockParameters(c, l, active ? c.moe.top_k : c.moe.experts);
  }
  return total;
}

}  // namespace

int64_t LlamaConfig::ParameterCount() const { return CountParameters(*this, false); }

int64_t LlamaConfig::ActiveParameterCount() const { return CountParameters(*this, true); }

double LlamaConfig::SoftmaxScaleFactor() const {
  if (!yarn.enabled()) return 1.0;
  const double mscale = 0.1 * yarn.mscale * std::log(yarn.factor) + 1.0;
  return mscale * mscale;
}

namespace {

// Latent attention's sizes against the kernels: even rotated and unrotated halves (RoPE pairs),
// the head size the attention runs with, one key and value head per query head, and values no
// wider than the queries and keys (they are padded to their size).
absl::Status ValidateLatentAttention(const LlamaConfig& c) {
  const LatentAttentionConfig& a = c.mla;
  if (!a.enabled()) {
    if (c.yarn.enabled()) {
      return absl::InvalidArgumentError(
          "model: YaRN RoPE (rope_factor > 1) is implemented for latent attention only "
          "(kv_lora_rank > 0)");
    }
    return absl::OkStatus();
  }
  if (a.q_lora_rank < 0 || a.qk_nope_head_dim <= 0 || a.qk_rope_head_dim <= 0 ||
      a.v_head_dim <= 0 || a.qk_nope_head_dim % 2 != 0 || a.qk_rope_head_dim % 2 != 0 ||
      a.v_head_dim > a.qk_head_dim() || c.head_dim() != a.qk_head_dim() ||
      c.n_kv_heads != c.n_heads || c.qk_norm) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: latent attention expects even positive qk_nope_head_dim and qk_rope_head_dim, ",
        "0 < v_head_dim <= their sum = head_dim, n_kv_heads = n_heads and no qk_norm; found ",
        "q_lora_rank ", a.q_lora_rank, ", kv_lora_rank ", a.kv_lora_rank, ", qk_nope_head_dim ",
        a.qk_nope_head_dim, ", qk_rope_head_dim ", a.qk_rope_head_dim, ", v_head_dim ",
        a.v_head_dim, ", head_dim ", c.head_dim(), ", n_heads ", c.n_heads, ", n_kv_heads ",
        c.n_kv_heads, ", qk_norm ", c.qk_norm));
  }
  if (c.yarn.enabled() &&
      (c.yarn.original_seq_len <= 0 || c.yarn.beta_fast <= 0 || c.yarn.beta_slow <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: YaRN expects positive original_seq_len, beta_fast and beta_slow; found ",
        c.yarn.original_seq_len, ", ", c.yarn.beta_fast, ", ", c.yarn.beta_slow));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LlamaConfig::Validate() const {
  if (dim <= 0 || n_layers <= 0 || n_heads <= 0 || n_kv_heads <= 0 || vocab_size <= 0 ||
      multiple_of <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: expected positive sizes, found dim ", dim, ", n_layers ", n_layers,
                     ", n_heads ", n_heads, ", n_kv_heads ", n_kv_heads, ", vocab_size ",
                     vocab_size, ", multiple_of ", multiple_of));
  }
  if ((explicit_head_dim == 0 && dim % n_heads != 0) || head_dim() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model: expected n_heads to divide dim into an ",
                                                   "even head size, found dim ", dim,
                                                   " and n_heads ", n_heads));
  }
  if (n_heads % n_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model: expected n_kv_heads to divide n_heads, ",
                                                   "found ", n_kv_heads, " and ", n_heads));
  }
  TITAN_RETURN_IF_ERROR(ValidateLatentAttention(*this));
  if (!moe.enabled()) return absl::OkStatus();
  if (moe.groups < 1 || moe.experts % moe.groups != 0 || moe.groups_chosen < 1 ||
      moe.groups_chosen > moe.groups || (moe.groups > 1 && moe.experts / moe.groups < 2) ||
      (moe.groups > 1 && moe.top_k > moe.groups_chosen * (moe.experts / moe.groups))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: expected expert groups that divide the experts into groups of at least 2, ",
        "1 <= groups chosen <= groups, and top_k no more than the chosen groups' experts; found ",
        "experts ", moe.experts, ", groups ", moe.groups, ", groups chosen ", moe.groups_chosen,
        ", top_k ", moe.top_k));
  }
  if (moe.top_k < 1 || moe.top_k > moe.experts || moe.hidden_dim <= 0 || moe.shared_experts < 0 ||
      moe.dense_layers < 0 || moe.dense_layers > n_layers || moe.route_scale <= 0 ||
      moe.load_balance_coeff < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: expected 1 <= top_k <= experts, a positive expert hidden dim and route scale, ",
        "0 <= dense layers <= n_layers; found experts ", moe.experts, ", top_k ", moe.top_k,
        ", hidden dim ", moe.hidden_dim, ", shared experts ", moe.shared_experts, ", dense layers ",
        moe.dense_layers, ", route scale ", moe.route_scale, ", load balance coefficient ",
        moe.load_balance_coeff));
  }
  return absl::OkStatus();
}

absl::StatusOr<LlamaConfig> LlamaFlavor(absl::string_view flavor) {
  LlamaConfig c;
  if (flavor == "debugmodel") return c;
  // The debug model with the variants the larger flavors use, small enough to train in tests.
  if (flavor == "debugmodel_gqa") {
    c.n_kv_heads = 4;
    return c;
  }
  if (flavor == "debugmodel_tied") {
    c.tie_embeddings = true;
    return c;
  }
  c.vocab_size = 128256;
  if (flavor == "1B") {
    c.dim = 2048, c.n_layers = 16, c.n_heads = 32, c.n_kv_heads = 8;
    c.ffn_dim_multiplier = 1.5, c.multiple_of = 256, c.tie_embeddings = true;
  } else if (flavor == "3B") {
    c.dim = 3072, c.n_layers = 28, c.n_heads = 24, c.n_kv_heads = 8;
    c.ffn_dim_multiplier = 1.0, c.multiple_of = 256, c.tie_embeddings = true;
  } else if (flavor == "8B") {
    c.dim = 4096, c.n_layers = 32, c.n_heads = 32, c.n_kv_heads = 8;
    c.ffn_dim_multiplier = 1.3, c.multiple_of = 1024;
  } else if (flavor == "70B") {
    c.dim = 8192, c.n_layers = 80, c.n_heads = 64, c.n_kv_heads = 8;
    c.ffn_dim_multiplier = 1.3, c.multiple_of = 4096;
  } else if (flavor == "405B") {
    c.dim = 16384, c.n_layers = 126, c.n_heads = 128, c.n_kv_heads = 8;
    c.ffn_dim_multiplier = 1.2, c.multiple_of = 4096;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.flavor: expected one of debugmodel, debugmodel_gqa, debugmodel_tied, 1B, 3B, 8B, "
        "70B, 405B, found '",
        flavor, "'"));
  }
  return c;
}

absl::Status CheckTensorParallelDegree(const LlamaConfig& c, int degree, bool vocab_known) {
  if (c.mla.enabled() && degree > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "tensor parallel degree ", degree,
        ": tensor parallelism does not split multi-head latent attention (DeepSeek-V3) yet; use "
        "data_parallel_shard_degree (fsdp) or pipeline parallelism for this flavor"));
  }
  const std::pair<const char*, int64_t> divided[] = {
      {"n_heads", c.n_heads},
      {"n_kv_heads", c.n_kv_heads},
      {"the feed-forward hidden dim", c.hidden_dim()},
      {"the experts' hidden dim (moe_inter_dim)", c.moe.enabled() ? c.moe.hidden_dim : 0},
      {"vocab_size", c.vocab_size}};
  for (const auto& [what, size] : std::span(divided).first(vocab_known ? 5 : 4)) {
    if (degree < 1 || size % degree != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor parallel degree ", degree, ": expected it to divide the model's ", what,
          ", found ", what, " = ", size, " (each tensor-parallel rank takes an equal part)"));
    }
  }
  return absl::OkStatus();
}

std::map<std::string, std::string> CheckpointMetadataOf(const LlamaConfig& c, int64_t max_seq_len) {
  const auto text = NumberText;
  std::map<std::string, std::string> metadata = {
      {"model.dim", absl::StrCat(c.dim)},
      {"model.n_layers", absl::StrCat(c.n_layers)},
      {"model.n_heads", absl::StrCat(c.n_heads)},
      {"model.n_kv_heads", absl::StrCat(c.n_kv_heads)},
      {"model.vocab_size", absl::StrCat(c.vocab_size)},
      {"model.hidden_dim", absl::StrCat(c.hidden_dim())},
      {"model.norm_eps", text(c.norm_eps)},
      {"model.rope_theta", text(c.rope.theta)},
      {"model.rope_scaled", c.rope.scaled ? "true" : "false"},
      {"model.rope_scale_factor", text(c.rope.scale_factor)},
      {"model.rope_low_freq_factor", text(c.rope.low_freq_factor)},
      {"model.rope_high_freq_factor", text(c.rope.high_freq_factor)},
      {"model.rope_original_context", text(c.rope.original_context)},
      {"model.max_seq_len", absl::StrCat(max_seq_len)},
      {"model.tie_embeddings", c.tie_embeddings ? "true" : "false"},
      {"model.head_dim", absl::StrCat(c.head_dim())},
      {"model.qk_norm", c.qk_norm ? "true" : "false"},
      {"model.experts", absl::StrCat(c.moe.experts)},
      {"model.experts_per_token", absl::StrCat(c.moe.top_k)},
      {"model.expert_hidden_dim", absl::StrCat(c.moe.hidden_dim)},
      {"model.shared_experts", absl::StrCat(c.moe.shared_experts)},
      {"model.dense_layers", absl::StrCat(c.moe.dense_layers)}};
  // Only models with latent attention write its keys, so Llama's and Qwen3's metadata stay as
  // they were.
  if (c.mla.enabled()) {
    const LatentAttentionConfig& a = c.mla;
    metadata.insert({{"model.q_lora_rank", absl::StrCat(a.q_lora_rank)},
                     {"model.kv_lora_rank", absl::StrCat(a.kv_lora_rank)},
                     {"model.qk_nope_head_dim", absl::StrCat(a.qk_nope_head_dim)},
                     {"model.qk_rope_head_dim", absl::StrCat(a.qk_rope_head_dim)},
                     {"model.v_head_dim", absl::StrCat(a.v_head_dim)},
                     {"model.expert_groups", absl::StrCat(c.moe.groups)},
                     {"model.expert_groups_chosen", absl::StrCat(c.moe.groups_chosen)},
                     {"model.rope_yarn_factor", text(c.yarn.factor)},
                     {"model.rope_yarn_original_seq_len", text(c.yarn.original_seq_len)},
                     {"model.rope_yarn_beta_fast", text(c.yarn.beta_fast)},
                     {"model.rope_yarn_beta_slow", text(c.yarn.beta_slow)},
                     {"model.rope_yarn_mscale", text(c.yarn.mscale)},
                     {"model.score_func", c.moe.sigmoid ? "sigmoid" : "softmax"},
                     {"model.route_norm", c.moe.normalize ? "true" : "false"},
                     {"model.route_scale", text(c.moe.route_scale)}});
  }
  return metadata;
}

absl::StatusOr<std::vector<std::string>> AdoptCheckpointModel(
    const std::map<std::string, std::string>& metadata, absl::string_view source,
    absl::string_view flavor, LlamaConfig& config) {
  auto find = [&](const std::string& key) -> const std::string* {
    auto it = metadata.find("model." + key);
    return it == metadata.end() ? nullptr : &it->second;
  };
  std::vector<std::string> problems;
  auto bad_value = [&](const std::string& key, const std::string& text) {
    problems.push_back(absl::StrCat("model.", key, " = '", text, "' is not a number"));
  };
  const std::pair<const char*, int64_t> sizes[] = {
      {"dim", config.dim},
      {"n_layers", config.n_layers},
      {"n_heads", config.n_heads},
      {"n_kv_heads", config.n_kv_heads},
      {"hidden_dim", config.hidden_dim()},
      {"vocab_size", config.vocab_size},
      {"head_dim", config.head_dim()},
      {"experts", config.moe.experts},
      {"experts_per_token", config.moe.top_k},
      {"expert_hidden_dim", config.moe.hidden_dim},
      {"shared_experts", config.moe.shared_experts},
      {"dense_layers", config.moe.dense_layers},
      {"q_lora_rank", config.mla.q_lora_rank},
      {"kv_lora_rank", config.mla.kv_lora_rank},
      {"qk_nope_head_dim", config.mla.qk_nope_head_dim},
      {"qk_rope_head_dim", config.mla.qk_rope_head_dim},
      {"v_head_dim", config.mla.v_head_dim},
      {"expert_groups", config.moe.groups},
      {"expert_groups_chosen", config.moe.groups_chosen}};
  for (const auto& [key, ours] : sizes) {
    const std::string* text = find(key);
    int64_t theirs = 0;
    if (text == nullptr) continue;
    if (!absl::SimpleAtoi(*text, &theirs)) {
      bad_value(key, *text);
    } else if (theirs != ours) {
      problems.push_back(absl::StrCat(key, " = ", theirs, ", but ",
                                      std::string_view(key) == "vocab_size"
                                          ? std::string("the tokenizer's vocabulary has ")
                                          : absl::StrCat("model.flavor = \"", flavor, "\" has "),
                                      ours));
    }
  }
  // QK-norm's weights would be dropped, or missing.
  if (const std::string* qk_norm = find("qk_norm");
      qk_norm != nullptr && (*qk_norm == "true") != config.qk_norm) {
    problems.push_back(absl::StrCat("qk_norm = ", *qk_norm, ", but model.flavor = \"", flavor,
                                    "\" has ", config.qk_norm ? "true" : "false"));
  }
  // The router's rule (written with latent attention's keys): another would route otherwise.
  const std::pair<const char*, std::string> routing[] = {
      {"score_func", config.moe.sigmoid ? "sigmoid" : "softmax"},
      {"route_norm", config.moe.normalize ? "true" : "false"}};
  for (const auto& [key, ours] : routing) {
    if (const std::string* theirs = find(key); theirs != nullptr && *theirs != ours) {
      problems.push_back(
          absl::StrCat(key, " = ", *theirs, ", but model.flavor = \"", flavor, "\" has ", ours));
    }
  }
  if (const std::string* scale = find("route_scale")) {
    double theirs = 0;
    if (!absl::SimpleAtod(*scale, &theirs)) {
      bad_value("route_scale", *scale);
    } else if (theirs != config.moe.route_scale) {
      problems.push_back(absl::StrCat("route_scale = ", theirs, ", but model.flavor = \"", flavor,
                                      "\" has ", config.moe.route_scale));
    }
  }
  // Latent attention's weights would be missing, or dropped: a checkpoint without its keys has
  // none.
  if (config.mla.enabled() && find("kv_lora_rank") == nullptr && find("dim") != nullptr) {
    problems.push_back(absl::StrCat("no latent attention, but model.flavor = \"", flavor,
                                    "\" has kv_lora_rank ", config.mla.kv_lora_rank));
  }
  // A tied checkpoint fills an untied model's output from its embeddings; the reverse would
  // drop the checkpoint's output weights.
  if (const std::string* tied = find("tie_embeddings");
      tied != nullptr && *tied == "false" && config.tie_embeddings) {
    problems.push_back(absl::StrCat("separate output weights, but model.flavor = \"", flavor,
                                    "\" ties them to the embeddings"));
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " holds another model: ", absl::StrJoin(problems, "; "),
                     ". Choose the flavor (and tokenizer) it was trained with"));
  }

  std::vector<std::string> adopted;
  auto adopt = [&](const std::string& key, double& value) {
    const std::string* text = find(key);
    double theirs = 0;
    if (text == nullptr) return;
    if (!absl::SimpleAtod(*text, &theirs)) return bad_value(key, *text);
    if (theirs == value) return;
    adopted.push_back(
        absl::StrCat(key, " = ", theirs, " (the flavor's: ", value, ")"));  // %g: readable
    value = theirs;
  };
  adopt("norm_eps", config.norm_eps);
  if (config.mla.enabled()) {
    adopt("rope_yarn_factor", config.yarn.factor);
    adopt("rope_yarn_original_seq_len", config.yarn.original_seq_len);
    adopt("rope_yarn_beta_fast", config.yarn.beta_fast);
    adopt("rope_yarn_beta_slow", config.yarn.beta_slow);
    adopt("rope_yarn_mscale", config.yarn.mscale);
  }
  adopt("rope_theta", config.rope.theta);
  if (const std::string* scaled = find("rope_scaled")) {
    const bool theirs = *scaled == "true";
    if (theirs != config.rope.scaled) {
      adopted.push_back(absl::StrCat("rope_scaled = ", *scaled, " (the flavor's: ",
                                     config.rope.scaled ? "true" : "false", ")"));
      config.rope.scaled = theirs;
    }
  }
  if (config.rope.scaled) {
    adopt("rope_scale_factor", config.rope.scale_factor);
    adopt("rope_low_freq_factor", config.rope.low_freq_factor);
    adopt("rope_high_freq_factor", config.rope.high_freq_factor);
    adopt("rope_original_context", config.rope.original_context);
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": unreadable model metadata: ", absl::StrJoin(problems, "; ")));
  }
  return adopted;
}

}  // namespace titan
