#include "plugins/checkpoint/safetensors/hf_config.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace titan::safetensors {
namespace {

using Json = nlohmann::json;

// The shortest text that reads back as the same double; whole numbers without an exponent.
std::string FormatDouble(double value) {
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, end);
}

absl::Status Validate(const ModelShape& s) {
  if (s.dim <= 0 || s.n_layers <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 || s.vocab_size <= 0 ||
      s.hidden_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected positive sizes, found dim ", s.dim, ", n_layers ", s.n_layers,
                     ", n_heads ", s.n_heads, ", n_kv_heads ", s.n_kv_heads, ", vocab_size ",
                     s.vocab_size, ", hidden_dim ", s.hidden_dim));
  }
  if (s.dim % s.n_heads != 0 || s.head_dim() % 2 != 0 || s.n_heads % s.n_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected n_heads to divide dim into even heads and n_kv_heads to divide "
                     "n_heads, found dim ",
                     s.dim, ", n_heads ", s.n_heads, ", n_kv_heads ", s.n_kv_heads));
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
  return absl::OkStatus();
}

// Reads metadata values, remembering the first error.
class MetadataReader {
 public:
  explicit MetadataReader(const CheckpointMetadata& metadata) : metadata_(metadata) {}

  void Int(const char* key, int64_t& out, bool required = true) {
    if (const std::string* text = Find(key, required)) {
      if (!absl::SimpleAtoi(*text, &out)) Fail(key, *text, "an integer");
    }
  }
  void Double(const char* key, double& out) {
    if (const std::string* text = Find(key, true)) {
      if (!absl::SimpleAtod(*text, &out)) Fail(key, *text, "a number");
    }
  }
  void Bool(const char* key, bool& out, bool required = true) {
    if (const std::string* text = Find(key, required)) {
      if (*text != "true" && *text != "false") Fail(key, *text, "\"true\" or \"false\"");
      out = *text == "true";
    }
  }
  const absl::Status& status() const { return status_; }

 private:
  const std::string* Find(const char* key, bool required) {
    auto it = metadata_.find(key);
    if (it != metadata_.end()) return &it->second;
    if (required && status_.ok()) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("the checkpoint metadata lacks '", key, "', which config.json needs"));
    }
    return nullptr;
  }
  void Fail(const char* key, const std::string& text, const char* expected) {
    if (!status_.ok()) return;
    status_ = absl::InvalidArgumentError(absl::StrCat("checkpoint metadata '", key, "': expected ",
                                                      expected, ", found '", text, "'"));
  }
  const CheckpointMetadata& metadata_;
  absl::Status status_;
};

// Reads config.json values, remembering the first error.
class ConfigReader {
 public:
  explicit ConfigReader(const Json& config) : config_(config) {}

  // An integer; `fallback` (when given) stands in for an absent key.
  void Int(const char* key, int64_t& out, std::optional<int64_t> fallback = std::nullopt) {
    const Json* value = Find(key, fallback.has_value());
    if (value == nullptr) {
      if (fallback) out = *fallback;
    } else if (value->is_number_integer()) {
      out = value->get<int64_t>();
    } else {
      Fail(key, *value, "an integer");
    }
  }
  void Double(const char* key, double& out, std::optional<double> fallback = std::nullopt) {
    const Json* value = Find(key, fallback.has_value());
    if (value == nullptr) {
      if (fallback) out = *fallback;
    } else if (value->is_number()) {
      out = value->get<double>();
    } else {
      Fail(key, *value, "a number");
    }
  }
  void Bool(const char* key, bool& out, bool fallback) {
    const Json* value = Find(key, true);
    if (value == nullptr) {
      out = fallback;
    } else if (value->is_boolean()) {
      out = value->get<bool>();
    } else {
      Fail(key, *value, "true or false");
    }
  }
  const Json* Find(const char* key, bool optional) {
    auto it = config_.find(key);
    if (it != config_.end() && !it->is_null()) return &*it;
    if (!optional && status_.ok()) {
      status_ = absl::InvalidArgumentError(absl::StrCat("expected a key \"", key, "\""));
    }
    return nullptr;
  }
  void Fail(const char* key, const Json& value, absl::string_view expected) {
    if (status_.ok()) {
      status_ = absl::InvalidArgumentError(
          absl::StrCat("\"", key, "\": expected ", expected, ", found ", value.dump()));
    }
  }
  absl::Status& status() { return status_; }

 private:
  const Json& config_;
  absl::Status status_;
};

// transformers' rope_scaling: null (or rope_type "default") or Llama 3's.
absl::Status ReadRopeScaling(ConfigReader& config, ModelShape& s) {
  const Json* scaling = config.Find("rope_scaling", true);
  if (scaling == nullptr) return absl::OkStatus();
  if (!scaling->is_object()) {
    config.Fail("rope_scaling", *scaling, "an object or null");
    return config.status();
  }
  auto type = scaling->find("rope_type");
  if (type == scaling->end()) type = scaling->find("type");  // transformers before 4.45
  const std::string name = type != scaling->end() && type->is_string() ? type->get<std::string>()
                                                                       : std::string("(none)");
  if (name == "default") return absl::OkStatus();
  if (name != "llama3") {
    return absl::InvalidArgumentError(
        absl::StrCat("\"rope_scaling\": titan computes Llama 3's scaling (rope_type \"llama3\") "
                     "or none, found rope_type ",
                     type != scaling->end() ? type->dump() : std::string("(none)")));
  }
  s.rope_scaled = true;
  ConfigReader factors(*scaling);
  factors.Double("factor", s.rope_scale_factor);
  factors.Double("low_freq_factor", s.rope_low_freq_factor);
  factors.Double("high_freq_factor", s.rope_high_freq_factor);
  factors.Int("original_max_position_embeddings", s.rope_original_context);
  if (!factors.status().ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"rope_scaling\": ", factors.status().message()));
  }
  return absl::OkStatus();
}

// What titan's model cannot represent: biases, another activation, another head size.
absl::Status CheckLlama(ConfigReader& config, const ModelShape& s) {
  if (const Json* type = config.Find("model_type", true); type && *type != "llama") {
    return absl::InvalidArgumentError(
        absl::StrCat("\"model_type\": expected \"llama\", found ", type->dump()));
  }
  if (const Json* act = config.Find("hidden_act", true); act && *act != "silu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"hidden_act\": titan's feed-forward is SwiGLU, expected \"silu\", found ", act->dump()));
  }
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    if (const Json* value = config.Find(bias, true); value && *value != false) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", bias, "\": titan's Llama has no biases, found ", value->dump()));
    }
  }
  if (const Json* head_dim = config.Find("head_dim", true);
      head_dim && s.n_heads > 0 && *head_dim != s.dim / s.n_heads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"head_dim\": titan's heads are hidden_size / num_attention_heads = ", s.dim / s.n_heads,
        ", found ", head_dim->dump()));
  }
  return absl::OkStatus();
}

}  // namespace

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
  config.Int("hidden_size", s.dim);
  config.Int("num_hidden_layers", s.n_layers);
  config.Int("num_attention_heads", s.n_heads);
  config.Int("num_key_value_heads", s.n_kv_heads, s.n_heads);  // transformers' defaults follow
  config.Int("vocab_size", s.vocab_size);
  config.Int("intermediate_size", s.hidden_dim);
  config.Double("rms_norm_eps", s.norm_eps, 1e-6);
  config.Double("rope_theta", s.rope_theta, 10000.0);
  config.Int("max_position_embeddings", s.max_seq_len, 2048);
  config.Bool("tie_word_embeddings", s.tie_embeddings, false);
  config.Double("attention_dropout", s.attention_dropout, 0.0);
  // Kept for a re-export when they are single ids (Llama 3.1 lists several eos ids: unknown).
  for (auto [key, id] :
       {std::pair{"bos_token_id", &s.bos_token_id}, std::pair{"eos_token_id", &s.eos_token_id}}) {
    if (const Json* value = config.Find(key, true); value && value->is_number_integer()) {
      *id = value->get<int64_t>();
    }
  }
  if (!config.status().ok()) return error(config.status().message());
  absl::Status status = ReadRopeScaling(config, s);
  if (status.ok()) status = CheckLlama(config, s);
  if (status.ok()) status = Validate(s);
  if (!status.ok()) return error(status.message());
  return s;
}

std::map<std::string, std::vector<int64_t>> ParameterShapes(const ModelShape& s) {
  const int64_t d = s.dim, kv = s.n_kv_heads * s.head_dim(), f = s.hidden_dim;
  std::map<std::string, std::vector<int64_t>> shapes = {
      {"tok_embeddings.weight", {s.vocab_size, d}}, {"norm.weight", {d}}};
  if (!s.tie_embeddings) shapes["output.weight"] = {s.vocab_size, d};
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string p = absl::StrCat("layers.", l, ".");
    shapes[p + "attention_norm.weight"] = {d};
    shapes[p + "attention.wq.weight"] = {d, d};
    shapes[p + "attention.wk.weight"] = {kv, d};
    shapes[p + "attention.wv.weight"] = {kv, d};
    shapes[p + "attention.wo.weight"] = {d, d};
    shapes[p + "ffn_norm.weight"] = {d};
    shapes[p + "feed_forward.w1.weight"] = {f, d};
    shapes[p + "feed_forward.w2.weight"] = {d, f};
    shapes[p + "feed_forward.w3.weight"] = {f, d};
  }
  return shapes;
}

}  // namespace titan::safetensors
