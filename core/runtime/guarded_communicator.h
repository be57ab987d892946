// A communicator whose calls into the comm plugin that made it cannot throw across the plugin
// boundary: an exception escaping any call (or a transfer's Wait, or a call on a communicator
// split from it) becomes an error naming the plugin, its file and the call, as CallPluginOf
// makes for the plugins' own calls.
#ifndef TITAN_CORE_RUNTIME_GUARDED_COMMUNICATOR_H_
#define TITAN_CORE_RUNTIME_GUARDED_COMMUNICATOR_H_

#include <memory>

#include "titan/communicator.h"

namespace titan {

// `world`, made by the plugin instance at `comm_plugin` (dynamic_cast<const void*> of it), guarded.
std::unique_ptr<Communicator> GuardCommunication(std::unique_ptr<Communicator> world,
                                                 const void* comm_plugin);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_GUARDED_COMMUNICATOR_H_
