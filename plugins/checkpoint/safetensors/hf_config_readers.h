// Readers of the two descriptions of a model, the checkpoint metadata titan passes and a
// Hugging Face config.json, each remembering the first error (which names the key), and the
// number format both are written in.
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_CONFIG_READERS_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_CONFIG_READERS_H_

#include <charconv>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "titan/checkpoint.h"
#include "titan/status.h"

namespace titan::safetensors {

using Json = nlohmann::json;

// The shortest text that reads back as the same double; whole numbers without an exponent.
inline std::string FormatDouble(double value) {
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, end);
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
  void String(const char* key, std::string& out, bool required = true) {
    if (const std::string* text = Find(key, required)) out = *text;
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
  // Whether the key is there at all (a null included).
  bool Has(const char* key) const { return config_.contains(key); }
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

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_HF_CONFIG_READERS_H_
