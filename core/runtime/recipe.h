// A training recipe: TOML sections after TorchTitan's, command-line overrides, validation
// against the core schema and the schemas of the plugins the recipe selects.
#ifndef TITAN_CORE_RUNTIME_RECIPE_H_
#define TITAN_CORE_RUNTIME_RECIPE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/runtime/plugin_registry.h"
#include "titan/config_view.h"
#include "titan/status.h"

namespace titan {

// A recipe as written, before its keys are checked.
struct RawRecipe {
  struct Value {
    std::optional<ConfigValue> value;  // as TOML typed it
    std::string unsupported_type;      // a TOML type no key takes (a date, a nested table)
    std::optional<std::string> text;   // a command-line override, typed by the schema later
    std::string where;                 // "file:line:column" or "command line --a.b=c"
  };
  struct Section {
    std::string where;
    std::vector<std::pair<std::string, Value>> keys;  // in file order
    const Value* Find(absl::string_view key) const;
    Value* Find(absl::string_view key);
  };
  std::string source;  // the file name, or what stands for it
  std::vector<std::pair<std::string, Section>> sections;
  const Section* Find(absl::string_view section) const;
  Section* Find(absl::string_view section);
};

absl::StatusOr<RawRecipe> ParseRecipeFile(const std::string& path);
absl::StatusOr<RawRecipe> ParseRecipeText(absl::string_view text, const std::string& source);

// Applies "section.key=value" (the text after "--").
absl::Status ApplyOverride(RawRecipe& recipe, absl::string_view assignment);

class Recipe {
 public:
  struct SelectedPlugin {
    std::string section;
    const PluginInfo* info = nullptr;
    std::unique_ptr<Plugin> instance;  // configured with its section
  };

  const ConfigView& section(absl::string_view name) const;
  // The plugins the recipe uses, in section order.
  const std::vector<SelectedPlugin>& plugins() const { return plugins_; }
  const std::string& source() const { return source_; }
  // The effective recipe, every key with its value, as TOML that parses back to the same.
  std::string ToToml() const;

 private:
  friend absl::StatusOr<Recipe> ValidateRecipe(const RawRecipe&, const PluginRegistry&);

  std::string source_;
  std::map<std::string, ConfigView, std::less<>> sections_;
  // Keys in print order, per section in schema order.
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, ConfigValue>>>> ordered_;
  std::vector<SelectedPlugin> plugins_;
};

// Checks every key (unknown, wrong type, out of range, missing), loads the plugins the recipe
// selects and lets them check their own keys. All problems are reported together, each naming
// file:line:column and the key.
absl::StatusOr<Recipe> ValidateRecipe(const RawRecipe& raw, const PluginRegistry& registry);

// A value as TOML writes it.
std::string FormatTomlValue(const ConfigValue& value);

// A ConfigKey's min or max as TOML writes it for the key's type.
std::string FormatBound(double bound, ConfigType type);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_RECIPE_H_
