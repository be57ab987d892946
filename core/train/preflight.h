// The job plan's derived values and its checks: everything a run checks before it starts, made
// while the plan is built, so that `titan-run --validate` refuses what the run would refuse: the
// job's folder, every size and product of sizes against int64 and memory, the parallel plugins
// the mesh needs (with their keys) and the pipeline's stages and schedule, the model's shapes
// against the tensor-parallel degree, the comm plugin against the device and the pipeline, the
// checkpoint format against what it must save, and (--validate) the data, tokenizer and starting
// checkpoint, read by the code the run reads them with.
#ifndef TITAN_CORE_TRAIN_PREFLIGHT_H_
#define TITAN_CORE_TRAIN_PREFLIGHT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime/plugin_registry.h"
#include "core/runtime/recipe.h"
#include "core/train/job_plan.h"

namespace titan {

// Fills the plan's derived values (resolved global batch, accumulation, pipeline microbatches,
// the model's shape, the parallel plugins and "auto"'s comm plugin)
// from its typed settings, and adds what is wrong to `problems` and the plan's warnings and
// notes; `recipe` only names where a value was set. An error return is a failure to check at
// all, or under PlanOptions::read_data the data's refusal, as the run's LoadData makes it.
absl::Status PlanAndCheck(const Recipe& recipe, const PluginRegistry& registry,
                          const PlanOptions& options, JobPlan& plan,
                          std::vector<std::string>& problems);

// float8.enable_fsdp_float8_all_gather needs fsdp (dp_shard > 1);
// precompute_float8_dynamic_scale_for_fsdp needs the float8 all-gather. `gather_where` and
// `precompute_where` say where each key was set.
absl::Status CheckFloat8AllGather(bool gather_float8, bool precompute, int dp_shard,
                                  absl::string_view gather_where,
                                  absl::string_view precompute_where);
// The run's data as `data` describes it, as data-parallel rank `dp_rank` of the job (of
// JobDataParallelDegree) reads it
// (LoadTrainingData), refused where one global batch would repeat sequences
// (CheckGlobalBatchFitsData).
absl::StatusOr<TrainingData> LoadCheckedTrainingData(const TrainingDataOptions& data,
                                                     const JobPlan& plan, int dp_rank);
// One optimizer step may not use more sequences than the training data holds (more would
// repeat sequences within a step, and an absurd global batch would never finish a step). Checked
// once the data is loaded: the data's size is not known before.
absl::Status CheckGlobalBatchFitsData(int64_t global_batch, int64_t seq_len,
                                      int64_t training_windows);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_PREFLIGHT_H_
