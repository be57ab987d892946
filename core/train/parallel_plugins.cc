#include "core/train/parallel_plugins.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/runtime/single_process_comm.h"

namespace titan {

absl::StatusOr<std::unique_ptr<ParallelPlugin>> CreateParallelPluginFor(
    MeshDim dim, const PluginRegistry& registry, const ConfigView& parallelism) {
  std::unique_ptr<ParallelPlugin> chosen;
  const PluginInfo* chosen_info = nullptr;
  std::vector<std::string> serving, others;
  for (const PluginInfo& info : registry.plugins()) {
    if (absl::string_view(info.descriptor->kind) != PluginKind<ParallelPlugin>::kName) continue;
    absl::StatusOr<std::unique_ptr<Plugin>> instance = Instantiate(info);
    if (!instance.ok()) {
      others.push_back(std::string(instance.status().message()));
      continue;
    }
    auto* plugin = static_cast<ParallelPlugin*>(instance->get());
    MeshDim served = MeshDim::kPp;
    absl::Status asked = CallPlugin(info, "dimension", [&] {
      served = plugin->dimension();
      return absl::OkStatus();
    });
    if (!asked.ok()) {
      others.push_back(std::string(asked.message()));
      continue;
    }
    if (served != dim) {
      others.push_back(absl::StrCat(info.descriptor->name, " (", MeshDimName(served), ")"));
      continue;
    }
    serving.push_back(info.Describe());
    if (chosen == nullptr) {
      chosen.reset(static_cast<ParallelPlugin*>(instance->release()));
      chosen_info = &info;
    }
  }
  if (serving.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "the mesh's ", MeshDimName(dim),
        " dimension needs a parallel plugin that serves it, and "
        "none on the plugin path does (",
        others.empty() ? "no parallel plugins found" : "found: ", absl::StrJoin(others, "; "),
        ")"));
  }
  if (serving.size() > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("the mesh's ", MeshDimName(dim), " dimension is served by ", serving.size(),
                     " parallel plugins: ", absl::StrJoin(serving, " and "),
                     "; keep one of them on the plugin path"));
  }
  TITAN_RETURN_IF_ERROR(
      CallPlugin(*chosen_info, "Configure", [&] { return chosen->Configure(parallelism); }));
  return chosen;
}

PlanningMesh::PlanningMesh(const MeshShape& shape, DevicePlugin& device,
                           bool ordered_point_to_point)
    : shape_(shape),
      device_(device),
      alone_(std::make_unique<SingleProcessCommunicator>(ordered_point_to_point)) {}

PlanningMesh::~PlanningMesh() = default;

}  // namespace titan
