#include "plugins/checkpoint/safetensors/hf_deepseek_config.h"

#include <cmath>

namespace titan::safetensors {
namespace {

absl::Status Refuse(absl::string_view key, absl::string_view found, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("checkpoint metadata '", key, "' = ", found, ": ", why));
}

// YaRN's scale of a softmax or of cos and sin, as transformers' get_mscale.
double YarnMscale(double factor, double mscale) {
  return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

// A number that transformers reads as `rope.get(key) or fallback`: absent, null and 0 fall back.
void OrDefault(ConfigReader& rope, const char* key, double& out, double fallback) {
  out = 0;
  rope.Double(key, out, 0.0);
  if (out == 0) out = fallback;
}

// transformers' YaRN for DeepSeek-V3 (_compute_yarn_parameters): the frequencies of
// max_position_embeddings / original_max_position_embeddings (factor when the original is not
// given), cos and sin times attention_factor (else mscale's over mscale_all_dim's, else
// get_mscale(factor)), and the softmax scale times get_mscale(factor, mscale_all_dim)^2. titan's
// is one factor for both, cos and sin unscaled, the cutoffs truncated.
absl::Status ReadYarn(const char* key, ConfigReader& rope, ModelShape& s) {
  auto error = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\": ", message));
  };
  rope.Double("factor", s.yarn_factor);
  OrDefault(rope, "beta_fast", s.yarn_beta_fast, 32);
  OrDefault(rope, "beta_slow", s.yarn_beta_slow, 1);
  double mscale = 0, mscale_all_dim = 0;
  rope.Double("mscale", mscale, 0.0);
  rope.Double("mscale_all_dim", mscale_all_dim, 0.0);
  std::optional<double> attention_factor;
  if (rope.Find("attention_factor", true) != nullptr) {
    attention_factor = 0;
    rope.Double("attention_factor", *attention_factor);
  }
  bool truncate = true;
  rope.Bool("truncate", truncate, true);
  int64_t original = s.max_seq_len;
  rope.Int("original_max_position_embeddings", original, s.max_seq_len);
  if (!rope.status().ok()) return error(rope.status().message());
  if (!(s.yarn_factor >= 1)) {
    return error(absl::StrCat("titan's YaRN stretches positions: expected a factor of 1 or more, ",
                              "found ", s.yarn_factor));
  }
  if (!truncate) {
    return error("titan's YaRN truncates the correction range (truncate true), found false");
  }
  if (static_cast<double>(s.max_seq_len) != s.yarn_factor * static_cast<double>(original)) {
    return error(absl::StrCat(
        "transformers takes YaRN's frequencies from max_position_embeddings / "
        "original_max_position_embeddings = ",
        s.max_seq_len, " / ", original, " and its softmax scale from factor = ", s.yarn_factor,
        "; titan uses one factor for both: expected them equal"));
  }
  const double cos_sin =
      attention_factor ? *attention_factor
      : mscale != 0 && mscale_all_dim != 0
          ? YarnMscale(s.yarn_factor, mscale) / YarnMscale(s.yarn_factor, mscale_all_dim)
          : YarnMscale(s.yarn_factor, 1.0);
  if (cos_sin != 1.0) {
    return error(absl::StrCat(
        "transformers would scale cos and sin by ", cos_sin,
        " (attention_factor, or get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)); "
        "titan's DeepSeek-V3 scales the softmax only: expected mscale = mscale_all_dim, found ",
        mscale, " and ", mscale_all_dim));
  }
  s.yarn_original_seq_len = static_cast<double>(original);
  s.yarn_mscale = mscale_all_dim;
  return absl::OkStatus();
}

// transformers 4's rope_theta and rope_scaling, or transformers 5's rope_parameters holding both.
absl::Status ReadRope(ConfigReader& config, ModelShape& s) {
  config.Double("rope_theta", s.rope_theta, 10000.0);
  const char* key = "rope_scaling";
  const Json* rope = config.Find(key, true);
  if (rope == nullptr && config.Find("rope_parameters", true) != nullptr) {
    key = "rope_parameters";
    rope = config.Find(key, true);
  }
  TITAN_RETURN_IF_ERROR(config.status());
  if (rope == nullptr) return absl::OkStatus();
  if (!rope->is_object()) {
    config.Fail(key, *rope, "an object or null");
    return config.status();
  }
  ConfigReader parameters(*rope);
  parameters.Double("rope_theta", s.rope_theta, s.rope_theta);
  auto type = rope->find("rope_type");
  if (type == rope->end()) type = rope->find("type");  // transformers before 4.45, DeepSeek's own
  const bool named = type != rope->end() && type->is_string();
  if (!parameters.status().ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", key, "\": ", parameters.status().message()));
  }
  // rope_parameters always holds rope_theta; without a rope_type it scales nothing.
  if ((!named && key == std::string_view("rope_parameters")) || (named && *type == "default")) {
    return absl::OkStatus();
  }
  if (!named || *type != "yarn") {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", key, "\": titan computes DeepSeek-V3's YaRN (rope_type \"yarn\") or no scaling, ",
        "found rope_type ", type != rope->end() ? type->dump() : std::string("(none)")));
  }
  return ReadYarn(key, parameters, s);
}

// Keys of DeepSeek's own configuration (its remote code) that transformers ignores, and what
// titan's routing and weights are.
absl::Status CheckDeepseekOwnKeys(ConfigReader& config) {
  const std::pair<const char*, Json> expected[] = {
      {"scoring_func", "sigmoid"}, {"topk_method", "noaux_tc"}, {"moe_layer_freq", 1}};
  for (const auto& [key, value] : expected) {
    if (const Json* found = config.Find(key, true); found && *found != value) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", key, "\": titan routes as transformers' DeepseekV3 does, expected ",
                       value.dump(), ", found ", found->dump()));
    }
  }
  if (config.Find("quantization_config", true) != nullptr) {
    return absl::InvalidArgumentError(
        "\"quantization_config\": the weights are quantized (DeepSeek-V3's FP8 blocks); titan "
        "reads f32, bf16 or f16 weights: dequantize them first");
  }
  return absl::OkStatus();
}

absl::Status CheckDeepseekModel(ConfigReader& config, const ModelShape& s) {
  if (const Json* act = config.Find("hidden_act", true); act && *act != "silu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"hidden_act\": titan's feed-forward is SwiGLU, expected \"silu\", found ", act->dump()));
  }
  if (const Json* bias = config.Find("attention_bias", true); bias && *bias != false) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"attention_bias\": titan's latent attention has no biases, found ", bias->dump()));
  }
  if (s.n_kv_heads != s.n_heads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"num_key_value_heads\": latent attention makes a key and a value per head, expected "
        "num_attention_heads = ",
        s.n_heads, ", found ", s.n_kv_heads));
  }
  if (const Json* head_dim = config.Find("head_dim", true);
      head_dim && *head_dim != s.qk_rope_head_dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"head_dim\": transformers' DeepseekV3 rotates head_dim features, which are "
                     "qk_rope_head_dim = ",
                     s.qk_rope_head_dim, ", found ", head_dim->dump()));
  }
  return CheckDeepseekOwnKeys(config);
}

}  // namespace

absl::Status ReadDeepseekMetadata(MetadataReader& read, ModelShape& s) {
  s.family = HfFamily::kDeepseekV3;
  s.rope_scaled = false;  // latent attention's RoPE is YaRN's, never Llama 3's scaling
  bool qk_norm = false;
  std::string score = "sigmoid";
  read.Bool("model.qk_norm", qk_norm, false);
  read.Int("model.head_dim", s.explicit_head_dim);
  read.Int("model.q_lora_rank", s.q_lora_rank);
  read.Int("model.kv_lora_rank", s.kv_lora_rank);
  read.Int("model.qk_nope_head_dim", s.qk_nope_head_dim);
  read.Int("model.qk_rope_head_dim", s.qk_rope_head_dim);
  read.Int("model.v_head_dim", s.v_head_dim);
  read.Double("model.rope_yarn_factor", s.yarn_factor);
  read.Double("model.rope_yarn_original_seq_len", s.yarn_original_seq_len);
  read.Double("model.rope_yarn_beta_fast", s.yarn_beta_fast);
  read.Double("model.rope_yarn_beta_slow", s.yarn_beta_slow);
  read.Double("model.rope_yarn_mscale", s.yarn_mscale);
  read.Int("model.experts", s.experts, false);
  if (s.experts > 0) {
    read.Int("model.experts_per_token", s.experts_per_token);
    read.Int("model.expert_hidden_dim", s.expert_hidden_dim);
    read.Int("model.shared_experts", s.shared_experts);
    read.Int("model.dense_layers", s.dense_layers, false);
    read.Int("model.expert_groups", s.expert_groups);
    read.Int("model.expert_groups_chosen", s.expert_groups_chosen);
    read.String("model.score_func", score);
    read.Bool("model.route_norm", s.route_norm);
    read.Double("model.route_scale", s.route_scale);
  }
  TITAN_RETURN_IF_ERROR(read.status());
  if (qk_norm) return Refuse("model.qk_norm", "true", "DeepSeek-V3's latent attention has none");
  if (score != "sigmoid") {
    return Refuse("model.score_func", score,
                  "transformers' DeepseekV3 scores the experts by sigmoid (DeepseekV3TopkRouter); "
                  "a softmax router, as the 16B flavor's, has no transformers DeepSeek-V3 layout");
  }
  if (s.experts > 0 && s.shared_experts < 1) {
    return Refuse("model.shared_experts", absl::StrCat(s.shared_experts),
                  "transformers' DeepseekV3MoE always has shared experts (n_shared_experts >= 1)");
  }
  return absl::OkStatus();
}

void WriteDeepseekMetadata(const ModelShape& s, CheckpointMetadata& m) {
  m["model.qk_norm"] = "false";
  m["model.head_dim"] = absl::StrCat(s.head_dim());
  m["model.q_lora_rank"] = absl::StrCat(s.q_lora_rank);
  m["model.kv_lora_rank"] = absl::StrCat(s.kv_lora_rank);
  m["model.qk_nope_head_dim"] = absl::StrCat(s.qk_nope_head_dim);
  m["model.qk_rope_head_dim"] = absl::StrCat(s.qk_rope_head_dim);
  m["model.v_head_dim"] = absl::StrCat(s.v_head_dim);
  m["model.rope_yarn_factor"] = FormatDouble(s.yarn_factor);
  m["model.rope_yarn_original_seq_len"] = FormatDouble(s.yarn_original_seq_len);
  m["model.rope_yarn_beta_fast"] = FormatDouble(s.yarn_beta_fast);
  m["model.rope_yarn_beta_slow"] = FormatDouble(s.yarn_beta_slow);
  m["model.rope_yarn_mscale"] = FormatDouble(s.yarn_mscale);
  m["model.experts"] = absl::StrCat(s.experts);
  m["model.experts_per_token"] = absl::StrCat(s.experts_per_token);
  m["model.expert_hidden_dim"] = absl::StrCat(s.expert_hidden_dim);
  m["model.shared_experts"] = absl::StrCat(s.shared_experts);
  m["model.dense_layers"] = absl::StrCat(s.dense_layers);
  m["model.expert_groups"] = absl::StrCat(s.expert_groups);
  m["model.expert_groups_chosen"] = absl::StrCat(s.expert_groups_chosen);
  m["model.score_func"] = "sigmoid";
  m["model.route_norm"] = s.route_norm ? "true" : "false";
  m["model.route_scale"] = FormatDouble(s.route_scale);
}

absl::Status ValidateDeepseek(const ModelShape& s) {
  const int64_t qk = s.qk_nope_head_dim + s.qk_rope_head_dim;
  if (s.kv_lora_rank <= 0 || s.q_lora_rank < 0 || s.qk_nope_head_dim <= 0 ||
      s.qk_rope_head_dim <= 0 || s.qk_rope_head_dim % 2 != 0 || s.v_head_dim <= 0 ||
      s.head_dim() != qk || s.n_kv_heads != s.n_heads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected latent attention of positive ranks and head sizes, an even qk_rope_head_dim, "
        "head_dim = qk_nope_head_dim + qk_rope_head_dim and a kv head per head, found q_lora_rank ",
        s.q_lora_rank, ", kv_lora_rank ", s.kv_lora_rank, ", qk_nope_head_dim ", s.qk_nope_head_dim,
        ", qk_rope_head_dim ", s.qk_rope_head_dim, ", v_head_dim ", s.v_head_dim, ", head_dim ",
        s.head_dim(), ", n_heads ", s.n_heads, ", n_kv_heads ", s.n_kv_heads));
  }
  if (s.experts > 0 &&
      (s.experts_per_token < 1 || s.experts_per_token > s.experts || s.expert_hidden_dim <= 0 ||
       s.dense_layers < 0 || s.dense_layers > s.n_layers || s.shared_experts < 1 ||
       s.expert_groups < 1 || s.experts % s.expert_groups != 0 || s.expert_groups_chosen < 1 ||
       s.expert_groups_chosen > s.expert_groups || !(s.route_scale > 0))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected 1 <= experts per token <= experts, a positive expert hidden dim and route "
        "scale, 0 <= dense layers <= n_layers, shared experts, and groups that divide the experts "
        "of which 1 to all are chosen; found experts ",
        s.experts, ", experts per token ", s.experts_per_token, ", expert hidden dim ",
        s.expert_hidden_dim, ", dense layers ", s.dense_layers, ", shared experts ",
        s.shared_experts, ", groups ", s.expert_groups, ", groups chosen ", s.expert_groups_chosen,
        ", route scale ", s.route_scale));
  }
  if (s.yarn_factor > 1) {
    const double positions = s.yarn_factor * s.yarn_original_seq_len;
    if (!(s.yarn_original_seq_len > 0) || !(s.yarn_beta_fast > 0) || !(s.yarn_beta_slow > 0) ||
        s.yarn_original_seq_len != std::trunc(s.yarn_original_seq_len) ||
        positions != std::trunc(positions)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expected YaRN over a whole positive original context whose length times the factor is "
          "whole (transformers' max_position_embeddings), and positive beta_fast and beta_slow; "
          "found factor ",
          s.yarn_factor, ", original context ", s.yarn_original_seq_len, ", beta_fast ",
          s.yarn_beta_fast, ", beta_slow ", s.yarn_beta_slow));
    }
  }
  return absl::OkStatus();
}

void WriteDeepseekConfig(const ModelShape& s, Json& config) {
  const bool moe = s.experts > 0;
  config["architectures"] = {"DeepseekV3ForCausalLM"};
  config["model_type"] = "deepseek_v3";
  config.erase("mlp_bias");
  // DeepseekV3Config's head_dim is the rotated features' (RoPE's dimension).
  config["head_dim"] = s.qk_rope_head_dim;
  config["qk_head_dim"] = s.head_dim();
  config["q_lora_rank"] = s.q_lora_rank > 0 ? Json(s.q_lora_rank) : Json(nullptr);
  config["kv_lora_rank"] = s.kv_lora_rank;
  config["qk_nope_head_dim"] = s.qk_nope_head_dim;
  config["qk_rope_head_dim"] = s.qk_rope_head_dim;
  config["v_head_dim"] = s.v_head_dim;
  config["n_routed_experts"] = s.experts;
  config["num_experts_per_tok"] = s.experts_per_token;
  config["moe_intermediate_size"] = s.expert_hidden_dim;
  config["n_shared_experts"] = s.shared_experts;
  // A model without experts is dense in every layer.
  config["first_k_dense_replace"] = moe ? s.dense_layers : s.n_layers;
  config["n_group"] = s.expert_groups;
  config["topk_group"] = s.expert_groups_chosen;
  config["routed_scaling_factor"] = s.route_scale;
  config["norm_topk_prob"] = s.route_norm;
  // titan's rotated features are interleaved pairs, as DeepSeek's own weights.
  config["rope_interleave"] = true;
  config["attention_dropout"] = 0.0;
  if (s.yarn_factor > 1) {
    // DeepSeek-V3's own form: max_position_embeddings the stretched context; cos and sin
    // unscaled (mscale = mscale_all_dim, and attention_factor 1 for transformers before mscale).
    const int64_t original = static_cast<int64_t>(s.yarn_original_seq_len);
    config["max_position_embeddings"] = static_cast<int64_t>(s.yarn_factor * original);
    config["rope_scaling"] = {{"rope_type", "yarn"},
                              {"factor", s.yarn_factor},
                              {"original_max_position_embeddings", original},
                              {"beta_fast", s.yarn_beta_fast},
                              {"beta_slow", s.yarn_beta_slow},
                              {"mscale", s.yarn_mscale},
                              {"mscale_all_dim", s.yarn_mscale},
                              {"attention_factor", 1.0}};
  }
}

absl::Status ReadDeepseekConfig(ConfigReader& config, ModelShape& s) {
  s.family = HfFamily::kDeepseekV3;
  config.Int("hidden_size", s.dim);
  config.Int("num_hidden_layers", s.n_layers);
  config.Int("num_attention_heads", s.n_heads);
  config.Int("vocab_size", s.vocab_size);
  config.Int("intermediate_size", s.hidden_dim);
  TITAN_RETURN_IF_ERROR(config.status());
  // DeepseekV3Config's defaults (DeepSeek-V3's own sizes) follow.
  config.Int("num_key_value_heads", s.n_kv_heads, s.n_heads);
  config.Double("rms_norm_eps", s.norm_eps, 1e-6);
  config.Int("max_position_embeddings", s.max_seq_len, 4096);
  config.Bool("tie_word_embeddings", s.tie_embeddings, false);
  config.Double("attention_dropout", s.attention_dropout, 0.0);
  config.Int("kv_lora_rank", s.kv_lora_rank, 512);
  config.Int("qk_nope_head_dim", s.qk_nope_head_dim, 128);
  config.Int("qk_rope_head_dim", s.qk_rope_head_dim, 64);
  config.Int("v_head_dim", s.v_head_dim, 128);
  config.Int("n_routed_experts", s.experts, 256);
  config.Int("num_experts_per_tok", s.experts_per_token, 8);
  config.Int("moe_intermediate_size", s.expert_hidden_dim, 2048);
  config.Int("n_shared_experts", s.shared_experts, 1);
  config.Int("first_k_dense_replace", s.dense_layers, 3);
  config.Int("n_group", s.expert_groups, 8);
  config.Int("topk_group", s.expert_groups_chosen, 4);
  config.Double("routed_scaling_factor", s.route_scale, 2.5);
  config.Bool("norm_topk_prob", s.route_norm, true);
  config.Bool("rope_interleave", s.rope_interleaved, true);
  config.Int("num_nextn_predict_layers", s.prediction_layers, 0);
  // Absent: DeepSeek-V3's 1536; null: plain queries (q_proj).
  s.q_lora_rank = 1536;
  if (config.Has("q_lora_rank")) {
    s.q_lora_rank = 0;
    if (const Json* rank = config.Find("q_lora_rank", true)) {
      if (!rank->is_number_integer() || rank->get<int64_t>() <= 0) {
        config.Fail("q_lora_rank", *rank, "a positive integer, or null for plain queries");
      } else {
        s.q_lora_rank = rank->get<int64_t>();
      }
    }
  }
  TITAN_RETURN_IF_ERROR(config.status());
  s.explicit_head_dim = s.qk_nope_head_dim + s.qk_rope_head_dim;
  if (s.dense_layers >= s.n_layers) {  // DeepseekV3MoE in no layer
    s.experts = s.experts_per_token = s.expert_hidden_dim = s.shared_experts = 0;
    s.dense_layers = 0, s.expert_groups = s.expert_groups_chosen = 1;
  }
  TITAN_RETURN_IF_ERROR(CheckDeepseekModel(config, s));
  return ReadRope(config, s);
}

void AddDeepseekLayerShapes(const ModelShape& s, int64_t layer, const std::string& p,
                            std::map<std::string, std::vector<int64_t>>& shapes) {
  const int64_t d = s.dim, h = s.n_heads, q = h * s.head_dim(), ql = s.q_lora_rank;
  const int64_t kvl = s.kv_lora_rank;
  if (ql > 0) {
    shapes[p + "attention.wq_a.weight"] = {ql, d};
    shapes[p + "attention.q_norm.weight"] = {ql};
    shapes[p + "attention.wq_b.weight"] = {q, ql};
  } else {
    shapes[p + "attention.wq.weight"] = {q, d};
  }
  shapes[p + "attention.wkv_a.weight"] = {kvl + s.qk_rope_head_dim, d};
  shapes[p + "attention.kv_norm.weight"] = {kvl};
  shapes[p + "attention.wkv_b.weight"] = {h * (s.qk_nope_head_dim + s.v_head_dim), kvl};
  shapes[p + "attention.wo.weight"] = {d, h * s.v_head_dim};
  if (!s.IsMoeLayer(layer)) {
    shapes[p + "feed_forward.w1.weight"] = {s.hidden_dim, d};
    shapes[p + "feed_forward.w2.weight"] = {d, s.hidden_dim};
    shapes[p + "feed_forward.w3.weight"] = {s.hidden_dim, d};
    return;
  }
  const int64_t e = s.experts, fe = s.expert_hidden_dim, fs = s.shared_experts * fe;
  shapes[p + "moe.router.gate.weight"] = {e, d};
  shapes[p + "moe.expert_bias"] = {e};
  shapes[p + "moe.experts.w1"] = {e, fe, d};
  shapes[p + "moe.experts.w2"] = {e, d, fe};
  shapes[p + "moe.experts.w3"] = {e, fe, d};
  shapes[p + "moe.shared_experts.w1.weight"] = {fs, d};
  shapes[p + "moe.shared_experts.w2.weight"] = {d, fs};
  shapes[p + "moe.shared_experts.w3.weight"] = {fs, d};
}

}  // namespace titan::safetensors
