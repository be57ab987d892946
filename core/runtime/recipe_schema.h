// The recipe's sections and the keys the core owns in each. Sections that select a plugin
// also accept the keys that plugin declares.
#ifndef TITAN_CORE_RUNTIME_RECIPE_SCHEMA_H_
#define TITAN_CORE_RUNTIME_RECIPE_SCHEMA_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "titan/config_view.h"

namespace titan {

struct SectionSchema {
  std::string name;
  std::string help;
  std::vector<ConfigKey> keys;
  // For a section that selects a plugin: its kind and the key naming it, and when the plugin
  // is in use (given the core values of every section validated so far).
  std::string plugin_kind;
  std::string plugin_key;
  std::function<bool(const std::map<std::string, ConfigView, std::less<>>&)> plugin_in_use;
  // Keys the run does not act on yet, each with the reason: a value other than the key's
  // default is refused, so that a recipe never claims what the run does not do. The key "*"
  // stands for every key of the section, the plugin's included.
  std::map<std::string, std::string> not_supported;
};

// In the order sections are validated and printed.
const std::vector<SectionSchema>& RecipeSchema();

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_RECIPE_SCHEMA_H_
