// The parallel plugins a mesh needs, chosen by the mesh dimension each one serves
// (ParallelPlugin::dimension), never by a plugin's name: a third-party plugin for a dimension is
// used as the bundled one would be.
#ifndef TITAN_CORE_TRAIN_PARALLEL_PLUGINS_H_
#define TITAN_CORE_TRAIN_PARALLEL_PLUGINS_H_

#include <memory>

#include "core/runtime/plugin_registry.h"
#include "titan/config_view.h"
#include "titan/device_mesh.h"
#include "titan/parallel.h"

namespace titan {

// The one parallel plugin on the plugin path whose dimension is `dim`, configured with
// `parallelism` (it checks its own keys there). None, or more than one, is an error naming the
// dimension and, for several, each plugin and its file.
absl::StatusOr<std::unique_ptr<ParallelPlugin>> CreateParallelPluginFor(
    MeshDim dim, const PluginRegistry& registry, const ConfigView& parallelism);

// The mesh as known before the ranks join: its shape, this process at coordinate 0 of every
// dimension, and a one-rank communicator for every group. It lets the plan ask a pipeline plugin
// to plan its stages (which reads the shape and the pp coordinate only) before the job starts.
class PlanningMesh : public DeviceMesh {
 public:
  // Its groups answer ordered_point_to_point() as the job's comm plugin says of itself.
  PlanningMesh(const MeshShape& shape, DevicePlugin& device, bool ordered_point_to_point = false);
  ~PlanningMesh() override;
  const MeshShape& shape() const override { return shape_; }
  int coordinate(MeshDim /*dim*/) const override { return 0; }
  Communicator& group(MeshDim /*dim*/) override { return *alone_; }
  Communicator& group_with_context(MeshDim /*dim*/) override { return *alone_; }
  Communicator& expert_shard_group() override { return *alone_; }
  Communicator& world() override { return *alone_; }
  DevicePlugin& device() override { return device_; }

 private:
  MeshShape shape_;
  DevicePlugin& device_;
  std::unique_ptr<Communicator> alone_;
};

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_PARALLEL_PLUGINS_H_
