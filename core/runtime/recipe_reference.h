#ifndef TITAN_CORE_RUNTIME_RECIPE_REFERENCE_H_
#define TITAN_CORE_RUNTIME_RECIPE_REFERENCE_H_

#include <string>

#include "core/runtime/plugin_registry.h"

namespace titan {

// Every recipe section and key, with type, default and meaning, as Markdown: the core's keys,
// then the keys each available plugin adds to the section that selects it.
std::string RecipeReference(const PluginRegistry& registry);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_RECIPE_REFERENCE_H_
