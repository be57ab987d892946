// A validated recipe section as a plugin sees it. The core checks every key against the
// schema the plugin declares (type, range, choices, required; a number must be finite) before
// the plugin runs, so a plugin reads values without re-checking them and reports cross-key
// problems with Error().
#ifndef TITAN_CONFIG_VIEW_H_
#define TITAN_CONFIG_VIEW_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace titan {

enum class ConfigType : uint8_t { kBool, kInt, kFloat, kString, kStringList };

constexpr const char* ConfigTypeName(ConfigType type) {
  switch (type) {
    case ConfigType::kBool:
      return "boolean";
    case ConfigType::kInt:
      return "integer";
    case ConfigType::kFloat:
      return "float";
    case ConfigType::kString:
      return "string";
    case ConfigType::kStringList:
      return "array of strings";
  }
  return "unknown";
}

using ConfigValue = std::variant<bool, int64_t, double, std::string, std::vector<std::string>>;

// One key a section accepts. A key without a default is required.
struct ConfigKey {
  std::string name;
  ConfigType type = ConfigType::kString;
  std::optional<ConfigValue> default_value;
  std::string help;
  std::optional<double> min;         // inclusive, for kInt and kFloat
  std::optional<double> max;         // inclusive, for kInt and kFloat
  std::vector<std::string> choices;  // allowed values, for kString and kStringList
};

class ConfigView {
 public:
  struct Entry {
    ConfigValue value;
    std::string where;  // "file:line:column" or "command line" or "default"
  };

  ConfigView() = default;
  ConfigView(std::string section, std::map<std::string, Entry> entries)
      : section_(std::move(section)), entries_(std::move(entries)) {}

  const std::string& section() const { return section_; }
  bool Has(absl::string_view key) const { return entries_.count(std::string(key)) > 0; }

  absl::StatusOr<bool> GetBool(absl::string_view key) const { return Get<bool>(key); }
  absl::StatusOr<int64_t> GetInt(absl::string_view key) const { return Get<int64_t>(key); }
  absl::StatusOr<double> GetFloat(absl::string_view key) const { return Get<double>(key); }
  absl::StatusOr<std::string> GetString(absl::string_view key) const {
    return Get<std::string>(key);
  }
  absl::StatusOr<std::vector<std::string>> GetStringList(absl::string_view key) const {
    return Get<std::vector<std::string>>(key);
  }

  // Where a key's value came from, for error messages.
  std::string Where(absl::string_view key) const {
    auto it = entries_.find(std::string(key));
    return it == entries_.end() ? std::string("default") : it->second.where;
  }

  // An error about a key's value that names where the value was set.
  absl::Status Error(absl::string_view key, absl::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(key), ": ", section_, ".", key, ": ", message));
  }

 private:
  template <typename T>
  absl::StatusOr<T> Get(absl::string_view key) const {
    auto it = entries_.find(std::string(key));
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat("[", section_, "] has no key '", key,
                                              "': declare it in the plugin's ConfigKeys()"));
    }
    if (const T* value = std::get_if<T>(&it->second.value)) return *value;
    return absl::InvalidArgumentError(
        absl::StrCat(section_, ".", key, " was read with the wrong type"));
  }

  std::string section_;
  std::map<std::string, Entry> entries_;
};

}  // namespace titan

#endif  // TITAN_CONFIG_VIEW_H_
