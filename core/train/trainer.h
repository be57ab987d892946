// The training run of a recipe on this rank of `mesh`: tokenizer (loaded or learned), packed
// data with a validation split, the model and its data-parallel plugin (ddp, fsdp or HSDP from
// the registry, by the mesh), the step loop (accumulation, clipping, LR schedule, NaN/Inf stop),
// metrics, periodic validation loss and a closing text sample. Rank 0 logs the metrics, saves
// the model and samples.
#ifndef TITAN_CORE_TRAIN_TRAINER_H_
#define TITAN_CORE_TRAIN_TRAINER_H_

#include "core/runtime/plugin_registry.h"
#include "core/runtime/recipe.h"
#include "titan/device_mesh.h"
#include "titan/optimizer.h"

namespace titan {

absl::Status Train(const Recipe& recipe, OptimizerPlugin& optimizer, DeviceMesh& mesh,
                   const PluginRegistry& registry);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_TRAINER_H_
