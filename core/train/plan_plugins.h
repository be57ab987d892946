// The plugins a job plan chooses and checks against each other, all by kind and by what the
// plugins say of themselves: the parallel plugins by the mesh dimension they serve (and the pp
// plugin's own planning of its stages), the comm plugin "auto" stands for by its CommTraits, the
// comm plugin against the device and the pipeline, a checkpoint format against what it must save.
// Part of building the plan (preflight.cc calls them).
#ifndef TITAN_CORE_TRAIN_PLAN_PLUGINS_H_
#define TITAN_CORE_TRAIN_PLAN_PLUGINS_H_

#include <string>
#include <vector>

#include "core/runtime/plugin_registry.h"
#include "core/runtime/recipe.h"
#include "core/train/job_plan.h"
#include "titan/comm.h"

namespace titan {

// Where a key's value was set ("file:line:column", a command-line override); for a default,
// the recipe file.
std::string WhereSet(const Recipe& recipe, const std::string& section, const std::string& key);

// The parallel plugins the plan's mesh needs, into plan.parallelism; what is wrong goes to
// `problems`.
void CreateParallelPlugins(const Recipe& recipe, const PluginRegistry& registry, JobPlan& plan,
                           std::vector<std::string>& problems);
// The pipeline plugin's own start-up checks, on the mesh's shape.
absl::Status CheckPipelinePlan(JobPlan& plan);
// The comm plugin "auto" stands for on more than one rank, into comm.
absl::Status ChooseAutoComm(const PluginRegistry& registry, const ConfigView& section,
                            CommSettings& comm);
// The plan's comm plugin against its device.
void CheckComm(const Recipe& recipe, const JobPlan& plan, std::vector<std::string>& problems);
// A format that holds models only may save the final model alone.
absl::Status CheckModelOnlyFormat(const JobPlan& plan);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_PLAN_PLUGINS_H_
