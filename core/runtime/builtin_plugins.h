// Plugins compiled into the core so that a bare install trains: the CPU device and the
// single-process communicator.
#ifndef TITAN_CORE_RUNTIME_BUILTIN_PLUGINS_H_
#define TITAN_CORE_RUNTIME_BUILTIN_PLUGINS_H_

#include <vector>

#include "titan/plugin.h"

namespace titan {

std::vector<const PluginDescriptor*> BuiltinPlugins();

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_BUILTIN_PLUGINS_H_
