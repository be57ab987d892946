// `parallel` plugins: one per mesh dimension (fsdp, ddp, tp, pp, cp). Each transforms the
// model for its dimension by substituting modules, adding hooks, or replacing the schedule.
#ifndef TITAN_PARALLEL_H_
#define TITAN_PARALLEL_H_

#include "titan/device_mesh.h"
#include "titan/module.h"
#include "titan/plugin.h"

namespace titan {

class ParallelPlugin : public Plugin {
 public:
  // The mesh dimension this plugin implements.
  virtual MeshDim dimension() const = 0;
  // Applies the transformation to the model in place; called in TorchTitan's order
  // (pp, tp, float8, activation checkpointing, fsdp/ddp).
  virtual absl::Status Apply(Module& model, DeviceMesh& mesh) = 0;
};

template <>
struct PluginKind<ParallelPlugin> {
  static constexpr const char* kName = "parallel";
};

}  // namespace titan

#endif  // TITAN_PARALLEL_H_
