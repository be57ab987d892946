#include "plugins/checkpoint/safetensors/hf_config.h"

#include <string_view>

#include "plugins/checkpoint/safetensors/hf_config_readers.h"
#include "plugins/checkpoint/safetensors/hf_deepseek_config.h"

namespace titan::safetensors {
namespace {

absl::Status Validate(const ModelShape& s) {
  if (s.dim <= 0 || s.n_layers <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 || s.vocab_size <= 0 ||
      s.hidden_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected positive sizes, found dim ", s.dim, ", n_layers ", s.n_layers,
                     ", n_heads ", s.n_heads, ", n_kv_heads ", s.n_kv_heads, ", vocab_size ",
                     s.vocab_size, ", hidden_dim ", s.hidden_dim));
  }
  if (s.explicit_head_dim < 0 || (s.explicit_head_dim == 0 && s.dim % s.n_heads != 0) ||
      s.head_dim() % 2 != 0 || s.n_heads % s.n_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected n_heads to divide dim into even heads and n_kv_heads to divide n_heads, found "
        "dim ",
        s.dim, ", n_heads ", s.n_heads, ", n_kv_heads ", s.n_kv_heads,
        s.explicit_head_dim != 0 ? absl::StrCat(", head_dim ", s.explicit_head_dim) : ""));
  }
  if (!(s.norm_eps > 0) || !(s.rope_theta > 0) || s.max_seq_len <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a positive norm_eps, rope_theta and max_seq_len, found ", s.norm_eps,
                     ", ", s.rope_theta, " and ", s.max_seq_len));
  }
  if (s.rope_scaled &&
      (!(s.rope_scale_factor > 0) || !(s.rope_low_freq_factor > 0) ||
       !(s.rope_high_freq_factor > s.rope_low_freq_factor) || s.rope_original_context <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected positive rope scaling with high_freq_factor > low_freq_factor, found factor ",
        s.rope_scale_factor, ", low_freq_factor ", s.rope_low_freq_factor, ", high_freq_factor ",
        s.rope_high_freq_factor, ", original context ", s.rope_original_context));
  }
  if (s.family == HfFamily::kQwen3Moe &&
      (s.experts <= 0 || s.experts_per_token < 1 || s.experts_per_token > s.experts ||
       s.expert_hidden_dim <= 0 || s.dense_layers < 0 || s.dense_layers > s.n_layers)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected 1 <= experts per token <= experts, a positive expert hidden dim and 0 <= dense "
        "layers <= n_layers, found experts ",
        s.experts, ", experts per token ", s.experts_per_token, ", expert hidden dim ",
        s.expert_hidden_dim, ", dense layers ", s.dense_layers));
  }
  if (s.latent_attention()) return ValidateDeepseek(s);
  return absl::OkStatus();
}

// transformers 4's rope_scaling (null, rope_type "default" or Llama 3's) beside rope_theta, or
// transformers 5's rope_parameters holding both.
absl::Status ReadRopeScaling(ConfigReader& config, ModelShape& s) {
  const char* key = "rope_scaling";
  const Json* scaling = config.Find(key, true);
  if (scaling == nullptr && config.Find("rope_parameters", true) != nullptr) {
    key = "rope_parameters";
    scaling = config.Find(key, true);
  }
  if (scaling == nullptr) return absl::OkStatus();
  if (!scaling->is_object()) {
    config.Fail(key, *scaling, "an object or null");
    return config.status();
  }
  ConfigReader factors(*scaling);
  factors.Double("rope_theta", s.rope_theta, s.rope_theta);
  const auto failed = [&] {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\": ", factors.status().message()));
  };
  if (!factors.status().ok()) return failed();
  auto type = scaling->find("rope_type");
  if (type == scaling->end()) type = scaling->find("type");  // transformers before 4.45
  const bool named = type != scaling->end() && type->is_string();
  // rope_parameters always holds rope_theta; without a rope_type it scales nothing.
  if ((!named && key == std::string_view("rope_parameters")) || (named && *type == "default")) {
    return absl::OkStatus();
  }
  if (!named || *type != "llama3") {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", key, "\": titan computes Llama 3's scaling (rope_type \"llama3\") or none, found ",
        "rope_type ", type != scaling->end() ? type->dump() : std::string("(none)")));
  }
  s.rope_scaled = true;
  factors.Double("factor", s.rope_scale_factor);
  factors.Double("low_freq_factor", s.rope_low_freq_factor);
  factors.Double("high_freq_factor", s.rope_high_freq_factor);
  factors.Int("original_max_position_embeddings", s.rope_original_context);
  return factors.status().ok() ? absl::OkStatus() : failed();
}

// model_type: "llama" (or none, as before transformers named it), "qwen3", "qwen3_moe" or
// "deepseek_v3".
absl::StatusOr<HfFamily> ReadModelType(ConfigReader& config) {
  const Json* type = config.Find("model_type", true);
  if (type == nullptr || *type == "llama") return HfFamily::kLlama;
  if (*type == "qwen3") return HfFamily::kQwen3;
  if (*type == "qwen3_moe") return HfFamily::kQwen3Moe;
  if (*type == "deepseek_v3") return HfFamily::kDeepseekV3;
  return absl::InvalidArgumentError(
      absl::StrCat("\"model_type\": expected \"llama\", found ", type->dump(),
                   " (titan also reads \"qwen3\", \"qwen3_moe\" and \"deepseek_v3\")"));
}

// What titan's model cannot represent: biases, another activation, another head size, a sliding
// window.
absl::Status CheckModel(ConfigReader& config, const ModelShape& s) {
  const char* family = s.family == HfFamily::kLlama ? "Llama" : "Qwen3";
  if (const Json* act = config.Find("hidden_act", true); act && *act != "silu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"hidden_act\": titan's feed-forward is SwiGLU, expected \"silu\", found ", act->dump()));
  }
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    if (const Json* value = config.Find(bias, true); value && *value != false) {
      return absl::InvalidArgumentError(absl::StrCat("\"", bias, "\": titan's ", family,
                                                     " has no biases, found ", value->dump()));
    }
  }
  if (s.family != HfFamily::kLlama) {
    if (const Json* window = config.Find("use_sliding_window", true); window && *window != false) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"use_sliding_window\": titan's Qwen3 attends to the whole context, found ",
                       window->dump()));
    }
    return absl::OkStatus();
  }
  if (const Json* head_dim = config.Find("head_dim", true);
      head_dim && s.n_heads > 0 && *head_dim != s.dim / s.n_heads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"head_dim\": titan's heads are hidden_size / num_attention_heads = ", s.dim / s.n_heads,
        ", found ", head_dim->dump()));
  }
  return absl::OkStatus();
}

// Qwen3-MoE's experts, with transformers' Qwen3MoeConfig defaults for absent keys (4's names or
// 5's). titan routes
// as it does with norm_topk_prob true, every layer but the first dense_layers
// (mlp_only_layers [0, ..., dense_layers - 1], decoder_sparse_step 1), with no shared expert.
absl::Status ReadExperts(ConfigReader& config, ModelShape& s) {
  // transformers 5 names it num_local_experts.
  const bool renamed = config.Find("num_experts", true) == nullptr &&
                       config.Find("num_local_experts", true) != nullptr;
  config.Int(renamed ? "num_local_experts" : "num_experts", s.experts, 128);
  config.Int("num_experts_per_tok", s.experts_per_token, 8);
  config.Int("moe_intermediate_size", s.expert_hidden_dim, 768);
  int64_t sparse_step = 1;
  config.Int("decoder_sparse_step", sparse_step, 1);
  bool normalized = false;
  config.Bool("norm_topk_prob", normalized, false);
  TITAN_RETURN_IF_ERROR(config.status());
  if (!normalized) {
    return absl::InvalidArgumentError(
        "\"norm_topk_prob\": titan's Qwen3-MoE normalizes the chosen experts' weights to sum to "
        "1, expected true, found false (transformers' default when absent)");
  }
  if (sparse_step != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"decoder_sparse_step\": titan's experts fill every layer after the first dense ones, "
        "expected 1, found ",
        sparse_step));
  }
  if (const Json* dense = config.Find("mlp_only_layers", true)) {
    bool prefix = dense->is_array();
    for (size_t i = 0; prefix && i < dense->size(); ++i) prefix = (*dense)[i] == Json(i);
    if (!prefix) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"mlp_only_layers\": titan keeps the dense feed-forward in the first layers only, "
          "expected [] or [0, 1, ..., k - 1], found ",
          dense->dump()));
    }
    s.dense_layers = static_cast<int64_t>(dense->size());
  }
  if (const Json* shared = config.Find("shared_expert_intermediate_size", true);
      shared && *shared != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"shared_expert_intermediate_size\": titan's Qwen3-MoE has no shared expert, found ",
        shared->dump()));
  }
  return absl::OkStatus();
}

// The tokenizer's ids, kept for a re-export when they are single ids (Llama 3.1 lists several eos
// ids: unknown).
void ReadTokenIds(ConfigReader& config, ModelShape& s) {
  for (auto [key, id] :
       {std::pair{"bos_token_id", &s.bos_token_id}, std::pair{"eos_token_id", &s.eos_token_id}}) {
    if (const Json* value = config.Find(key, true); value && value->is_number_integer()) {
      *id = value->get<int64_t>();
    }
  }
}

// The family the metadata describes: Llama, unless model.qk_norm is "true" (Qwen3, Qwen3-MoE
// when model.experts is positive); the Llama layout has no QK-norm and titan's Llama no experts.
absl::Status ReadFamily(MetadataReader& read, ModelShape& s) {
  int64_t kv_lora_rank = 0;
  read.Int("model.kv_lora_rank", kv_lora_rank, false);
  TITAN_RETURN_IF_ERROR(read.status());
  if (kv_lora_rank > 0) return ReadDeepseekMetadata(read, s);
  bool qk_norm = false;
  int64_t head_dim = 0, shared_experts = 0;
  read.Bool("model.qk_norm", qk_norm, false);
  read.Int("model.head_dim", head_dim, false);
  read.Int("model.experts", s.experts, false);
  read.Int("model.shared_experts", shared_experts, false);
  if (s.experts > 0) {
    read.Int("model.experts_per_token", s.experts_per_token);
    read.Int("model.expert_hidden_dim", s.expert_hidden_dim);
    read.Int("model.dense_layers", s.dense_layers, false);
  }
  TITAN_RETURN_IF_ERROR(read.status());
  auto refuse = [](absl::string_view key, auto found, absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint metadata '", key, "' = ", found, ": ", why));
  };
  if (!qk_norm) {
    if (s.experts != 0) {
      return refuse("model.experts", s.experts,
                    "titan exports a mixture of experts as Hugging Face's Qwen3-MoE, which has "
                    "QK-norm, or DeepSeek-V3, which has latent attention, but model.qk_norm is "
                    "not \"true\" and model.kv_lora_rank not positive");
    }
    if (head_dim != 0 && s.n_heads > 0 && head_dim * s.n_heads != s.dim) {
      return refuse(
          "model.head_dim", head_dim,
          absl::StrCat("a Llama's heads are model.dim / model.n_heads = ", s.dim / s.n_heads));
    }
    return absl::OkStatus();
  }
  if (s.experts < 0) return refuse("model.experts", s.experts, "expected 0 or more");
  if (shared_experts != 0) {
    return refuse("model.shared_experts", shared_experts,
                  "Hugging Face's Qwen3-MoE has no shared experts");
  }
  s.family = s.experts > 0 ? HfFamily::kQwen3Moe : HfFamily::kQwen3;
  s.explicit_head_dim = head_dim;
  return absl::OkStatus();
}

}  // namespace

double ModelShape::latent_scale() const { return std::sqrt(kHfLatentNormEps / norm_eps); }

absl::StatusOr<ModelShape> ModelShapeFromMetadata(const CheckpointMetadata& metadata) {
  ModelShape s;
  MetadataReader read(metadata);
  read.Int("model.dim", s.dim);
  read.Int("model.n_layers", s.n_layers);
  read.Int("model.n_heads", s.n_heads);
  read.Int("model.n_kv_heads", s.n_kv_heads);
  read.Int("model.vocab_size", s.vocab_size);
  read.Int("model.hidden_dim", s.hidden_dim);
  read.Double("model.norm_eps", s.norm_eps);
  read.Double("model.rope_theta", s.rope_theta);
  read.Bool("model.rope_scaled", s.rope_scaled);
  if (s.rope_scaled) {
    read.Double("model.rope_scale_factor", s.rope_scale_factor);
    read.Double("model.rope_low_freq_factor", s.rope_low_freq_factor);
    read.Double("model.rope_high_freq_factor", s.rope_high_freq_factor);
    double context = 0;
    read.Double("model.rope_original_context", context);
    s.rope_original_context = static_cast<int64_t>(context);
    if (read.status().ok() && static_cast<double>(s.rope_original_context) != context) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint metadata 'model.rope_original_context': expected a whole number, found ",
          context));
    }
  }
  read.Int("model.max_seq_len", s.max_seq_len, false);
  read.Bool("model.tie_embeddings", s.tie_embeddings, false);
  read.Int("model.bos_token_id", s.bos_token_id, false);
  read.Int("model.eos_token_id", s.eos_token_id, false);
  TITAN_RETURN_IF_ERROR(read.status());
  TITAN_RETURN_IF_ERROR(ReadFamily(read, s));
  absl::Status valid = Validate(s);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint metadata: ", valid.message()));
  }
  return s;
}

CheckpointMetadata MetadataOf(const ModelShape& s) {
  CheckpointMetadata m = {{"model.dim", absl::StrCat(s.dim)},
                          {"model.n_layers", absl::StrCat(s.n_layers)},
                          {"model.n_heads", absl::StrCat(s.n_heads)},
                          {"model.n_kv_heads", absl::StrCat(s.n_kv_heads)},
                          {"model.vocab_size", absl::StrCat(s.vocab_size)},
                          {"model.hidden_dim", absl::StrCat(s.hidden_dim)},
                          {"model.norm_eps", FormatDouble(s.norm_eps)},
                          {"model.rope_theta", FormatDouble(s.rope_theta)},
                          {"model.rope_scaled", s.rope_scaled ? "true" : "false"},
                          {"model.max_seq_len", absl::StrCat(s.max_seq_len)},
                          {"model.tie_embeddings", s.tie_embeddings ? "true" : "false"}};
  if (s.bos_token_id >= 0) m["model.bos_token_id"] = absl::StrCat(s.bos_token_id);
  if (s.attention_dropout != 0) m["model.attention_dropout"] = FormatDouble(s.attention_dropout);
  if (s.eos_token_id >= 0) m["model.eos_token_id"] = absl::StrCat(s.eos_token_id);
  if (s.rope_scaled) {
    m["model.rope_scale_factor"] = FormatDouble(s.rope_scale_factor);
    m["model.rope_low_freq_factor"] = FormatDouble(s.rope_low_freq_factor);
    m["model.rope_high_freq_factor"] = FormatDouble(s.rope_high_freq_factor);
    m["model.rope_original_context"] = absl::StrCat(s.rope_original_context);
  }
  if (s.latent_attention()) WriteDeepseekMetadata(s, m);
  if (s.qk_norm()) {  // as CheckpointMetadataOf writes a Qwen3's
    m["model.qk_norm"] = "true";
    m["model.head_dim"] = absl::StrCat(s.head_dim());
    m["model.experts"] = absl::StrCat(s.experts);
    m["model.experts_per_token"] = absl::StrCat(s.experts_per_token);
    m["model.expert_hidden_dim"] = absl::StrCat(s.expert_hidden_dim);
    m["model.shared_experts"] = "0";
    m["model.dense_layers"] = absl::StrCat(s.dense_layers);
  }
  return m;
}

std::string HfConfigJson(const ModelShape& s, DType dtype) {
  Json config = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", s.dim},
      {"intermediate_size", s.hidden_dim},
      {"num_hidden_layers", s.n_layers},
      {"num_attention_heads", s.n_heads},
      {"num_key_value_heads", s.n_kv_heads},
      {"head_dim", s.head_dim()},
      {"vocab_size", s.vocab_size},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"rms_norm_eps", s.norm_eps},
      {"rope_theta", s.rope_theta},
      {"rope_scaling", nullptr},
      {"max_position_embeddings", s.max_seq_len},
      {"tie_word_embeddings", s.tie_embeddings},
      {"bos_token_id", s.bos_token_id >= 0 ? Json(s.bos_token_id) : Json(nullptr)},
      {"eos_token_id", s.eos_token_id >= 0 ? Json(s.eos_token_id) : Json(nullptr)},
      {"torch_dtype", dtype == DType::kBF16  ? "bfloat16"
                      : dtype == DType::kF16 ? "float16"
                                             : "float32"},
  };
  if (s.rope_scaled) {
    config["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", s.rope_scale_factor},
                              {"low_freq_factor", s.rope_low_freq_factor},
                              {"high_freq_factor", s.rope_high_freq_factor},
                              {"original_max_position_embeddings", s.rope_original_context}};
  }
  if (s.latent_attention()) {
    WriteDeepseekConfig(s, config);
    return config.dump(2) + "\n";
  }
  if (s.family != HfFamily::kLlama) {
    // transformers' Qwen3Config: no mlp_bias; attention over the whole context.
    config.erase("mlp_bias");
    config["use_sliding_window"] = false;
    config["sliding_window"] = nullptr;
    config["max_window_layers"] = s.n_layers;
    config["attention_dropout"] = 0.0;
  }
  if (s.family == HfFamily::kQwen3) {
    config["architectures"] = {"Qwen3ForCausalLM"};
    config["model_type"] = "qwen3";
  } else if (s.family == HfFamily::kQwen3Moe) {
    config["architectures"] = {"Qwen3MoeForCausalLM"};
    config["model_type"] = "qwen3_moe";
    config["num_experts"] = s.experts;
    config["num_experts_per_tok"] = s.experts_per_token;
    config["moe_intermediate_size"] = s.expert_hidden_dim;
    config["norm_topk_prob"] = true;  // titan normalizes the chosen experts' weights
    config["decoder_sparse_step"] = 1;
    Json dense = Json::array();
    for (int64_t l = 0; l < s.dense_layers; ++l) dense.push_back(l);
    config["mlp_only_layers"] = dense;
    config["output_router_logits"] = false;
  }
  return config.dump(2) + "\n";
}

absl::StatusOr<ModelShape> ModelShapeFromHfConfig(absl::string_view text, absl::string_view path) {
  auto error = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
  };
  Json json;
  try {
    json = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    return error(absl::StrCat("does not parse as JSON: ", e.what()));
  }
  if (!json.is_object()) return error("expected a JSON object");
  ModelShape s;
  ConfigReader config(json);
  absl::StatusOr<HfFamily> family = ReadModelType(config);
  if (!family.ok()) return error(family.status().message());
  s.family = *family;
  if (s.latent_attention()) {
    ReadTokenIds(config, s);
    absl::Status status = ReadDeepseekConfig(config, s);
    if (status.ok()) status = Validate(s);
    if (!status.ok()) return error(status.message());
    return s;
  }
  const bool qwen3 = s.family != HfFamily::kLlama;
  config.Int("hidden_size", s.dim);
  config.Int("num_hidden_layers", s.n_layers);
  config.Int("num_attention_heads", s.n_heads);
  // transformers' defaults follow.
  config.Int("num_key_value_heads", s.n_kv_heads,
             s.family == HfFamily::kQwen3Moe ? 4
             : s.family == HfFamily::kQwen3  ? 32
                                             : s.n_heads);
  config.Int("vocab_size", s.vocab_size);
  config.Int("intermediate_size", s.hidden_dim);
  config.Double("rms_norm_eps", s.norm_eps, 1e-6);
  config.Double("rope_theta", s.rope_theta, 10000.0);
  config.Int("max_position_embeddings", s.max_seq_len, qwen3 ? 32768 : 2048);
  config.Bool("tie_word_embeddings", s.tie_embeddings, false);
  config.Double("attention_dropout", s.attention_dropout, 0.0);
  // Qwen3's heads are head_dim (128 when absent); Qwen3-MoE's hidden_size / num_attention_heads
  // when absent. A Llama's head_dim must be that (CheckModel).
  if (s.family == HfFamily::kQwen3) config.Int("head_dim", s.explicit_head_dim, 128);
  if (s.family == HfFamily::kQwen3Moe) config.Int("head_dim", s.explicit_head_dim, 0);
  ReadTokenIds(config, s);
  if (!config.status().ok()) return error(config.status().message());
  absl::Status status = ReadRopeScaling(config, s);
  if (status.ok()) status = CheckModel(config, s);
  if (status.ok() && s.family == HfFamily::kQwen3Moe) status = ReadExperts(config, s);
  if (status.ok()) status = Validate(s);
  if (!status.ok()) return error(status.message());
  return s;
}

std::map<std::string, std::vector<int64_t>> ParameterShapes(const ModelShape& s) {
  const int64_t d = s.dim, hd = s.head_dim(), q = s.n_heads * hd, kv = s.n_kv_heads * hd;
  const int64_t f = s.hidden_dim, e = s.experts, fe = s.expert_hidden_dim;
  std::map<std::string, std::vector<int64_t>> shapes = {
      {"tok_embeddings.weight", {s.vocab_size, d}}, {"norm.weight", {d}}};
  if (!s.tie_embeddings) shapes["output.weight"] = {s.vocab_size, d};
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string p = absl::StrCat("layers.", l, ".");
    shapes[p + "attention_norm.weight"] = {d};
    shapes[p + "ffn_norm.weight"] = {d};
    if (s.latent_attention()) {
      AddDeepseekLayerShapes(s, l, p, shapes);
      continue;
    }
    shapes[p + "attention.wq.weight"] = {q, d};
    shapes[p + "attention.wk.weight"] = {kv, d};
    shapes[p + "attention.wv.weight"] = {kv, d};
    shapes[p + "attention.wo.weight"] = {d, q};
    if (s.qk_norm()) {
      shapes[p + "attention.q_norm.weight"] = {hd};
      shapes[p + "attention.k_norm.weight"] = {hd};
    }
    if (s.IsMoeLayer(l)) {
      shapes[p + "moe.router.gate.weight"] = {e, d};
      shapes[p + "moe.expert_bias"] = {e};
      shapes[p + "moe.experts.w1"] = {e, fe, d};
      shapes[p + "moe.experts.w2"] = {e, d, fe};
      shapes[p + "moe.experts.w3"] = {e, fe, d};
    } else {
      shapes[p + "feed_forward.w1.weight"] = {f, d};
      shapes[p + "feed_forward.w2.weight"] = {d, f};
      shapes[p + "feed_forward.w3.weight"] = {f, d};
    }
  }
  return shapes;
}

}  // namespace titan::safetensors
