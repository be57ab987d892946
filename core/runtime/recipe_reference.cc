#include "core/runtime/recipe_reference.h"

#include <algorithm>
#include <map>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/runtime/recipe.h"
#include "core/runtime/recipe_schema.h"

namespace titan {
namespace {

std::string Row(const ConfigKey& key) {
  std::string type = ConfigTypeName(key.type);
  if (key.min && key.max) {
    absl::StrAppend(&type, " in [", FormatBound(*key.min, key.type), ", ",
                    FormatBound(*key.max, key.type), "]");
  } else if (key.min) {
    absl::StrAppend(&type, " >= ", FormatBound(*key.min, key.type));
  }
  if (!key.choices.empty()) absl::StrAppend(&type, ": ", absl::StrJoin(key.choices, ", "));
  std::string value =
      key.default_value ? absl::StrCat("`", FormatTomlValue(*key.default_value), "`") : "required";
  return absl::StrCat("| `", key.name, "` | ", type, " | ", value, " | ",
                      absl::StrReplaceAll(key.help, {{"|", "\\|"}}), " |\n");
}

}  // namespace

std::string RecipeReference(const PluginRegistry& registry) {
  std::string out;
  for (const SectionSchema& section : RecipeSchema()) {
    std::string help = section.help;
    help[0] = absl::ascii_toupper(help[0]);
    absl::StrAppend(&out, "#### [", section.name, "]\n\n", help, ".\n\n");
    if (!section.not_supported.empty()) {
      std::map<std::string, std::vector<std::string>> keys_by_reason;
      for (const auto& [key, reason] : section.not_supported) {
        keys_by_reason[reason].push_back(key == "*" ? "every key (the plugin's too)"
                                                    : absl::StrCat("`", key, "`"));
      }
      std::vector<std::string> refused;
      for (const auto& [reason, keys] : keys_by_reason) {
        refused.push_back(absl::StrCat(absl::StrJoin(keys, ", "), ": ", reason));
      }
      absl::StrAppend(&out, "Refused unless left at the default, ", absl::StrJoin(refused, "; "),
                      ".\n\n");
    }
    out += "| key | type | default | meaning |\n|---|---|---|---|\n";
    for (const ConfigKey& key : section.keys) out += Row(key);
    if (section.plugin_kind.empty()) {
      out += "\n";
      continue;
    }
    std::vector<const PluginInfo*> plugins;
    for (const PluginInfo& info : registry.plugins()) {
      if (info.descriptor->kind == section.plugin_kind) plugins.push_back(&info);
    }
    std::sort(plugins.begin(), plugins.end(), [](const PluginInfo* a, const PluginInfo* b) {
      return std::string_view(a->descriptor->name) < std::string_view(b->descriptor->name);
    });
    for (const PluginInfo* plugin_info : plugins) {
      const PluginInfo& info = *plugin_info;
      absl::StatusOr<std::unique_ptr<Plugin>> plugin = Instantiate(info);
      absl::StatusOr<std::vector<ConfigKey>> declared =
          plugin.ok() ? DeclaredKeys(info, **plugin) : plugin.status();
      if (!declared.ok()) {
        absl::StrAppend(&out, "\nWith `", section.plugin_key, " = \"", info.descriptor->name,
                        "\"`: unavailable (", declared.status().message(), ").\n");
        continue;
      }
      const std::vector<ConfigKey>& keys = *declared;
      absl::StrAppend(&out, "\nWith `", section.plugin_key, " = \"", info.descriptor->name, "\"` (",
                      info.descriptor->summary, ")",
                      keys.empty() ? ": no further keys.\n" : ":\n\n");
      if (keys.empty()) continue;
      out += "| key | type | default | meaning |\n|---|---|---|---|\n";
      for (const ConfigKey& key : keys) out += Row(key);
    }
    out += "\n";
  }
  return out;
}

}  // namespace titan
