// What a training run checks before it starts, so that `titan-run --validate` refuses what the
// run would refuse: the job's folder, every size and product of sizes against int64 and memory,
// the parallel plugins the mesh needs (with their keys), the model's shapes against the
// tensor-parallel degree, the data and tokenizer files the recipe names.
#ifndef TITAN_CORE_TRAIN_PREFLIGHT_H_
#define TITAN_CORE_TRAIN_PREFLIGHT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime/plugin_registry.h"
#include "core/runtime/recipe.h"
#include "titan/device_mesh.h"
#include "titan/parallel.h"

namespace titan {

struct ParallelPlugins {
  std::unique_ptr<ParallelPlugin> pipeline;          // pp when its degree is above 1
  std::unique_ptr<ParallelPlugin> context_parallel;  // cp when its degree is above 1
  std::unique_ptr<ParallelPlugin> tensor_parallel;   // tp when its degree is above 1
  std::unique_ptr<ParallelPlugin> data_parallel;     // fsdp, ddp or none, as TorchTitan picks
};

// The parallel plugins `shape` needs, created from `registry` and configured with the recipe's
// [parallelism] section.
absl::StatusOr<ParallelPlugins> CreateParallelPlugins(const Recipe& recipe,
                                                      const PluginRegistry& registry,
                                                      const MeshShape& shape);

// Pipeline microbatches per local batch: training.local_batch_size /
// parallelism.pipeline_parallel_microbatch_size (1 without pipeline parallelism); refuses a
// local batch that is not a multiple.
absl::StatusOr<int64_t> PipelineMicrobatches(const Recipe& recipe, const MeshShape& shape);

// Microbatches per optimizer step: training.global_batch_size / (local_batch_size x the
// data-parallel degree), -1 meaning 1. Refuses a global batch that is not such a multiple, and
// sizes whose products (tokens per microbatch, per step, per run) overflow int64.
absl::StatusOr<int64_t> GradientAccumulation(const Recipe& recipe, const MeshShape& shape);

// One optimizer step may not use more sequences than the training data holds (more would
// repeat sequences within a step, and an absurd global batch would never finish a step).
// float8.enable_fsdp_float8_all_gather needs fsdp (dp_shard > 1);
// precompute_float8_dynamic_scale_for_fsdp needs the float8 all-gather. `where` names the key.
absl::Status CheckFloat8AllGather(bool gather_float8, bool precompute, int dp_shard,
                                  absl::string_view where);
absl::Status CheckGlobalBatchFitsData(int64_t global_batch, int64_t seq_len,
                                      int64_t training_windows);

struct PreflightOptions {
  // Reads the tokenizer file (a large vocabulary takes a moment) to check its size against the
  // tp degree, and checks that the dataset exists. A run leaves both to its loaders, which
  // name what is wrong, and to the model, which checks the vocabulary once it is loaded.
  bool check_files = false;
  // Bytes of memory one rank may use; 0: this machine's physical memory.
  int64_t memory_bytes = 0;
};

struct PreflightReport {
  std::vector<std::string> warnings;   // legal but probably not meant
  std::vector<std::string> unchecked;  // what only the run can check, and why
};

// Every check above on the recipe for `shape`; all problems are reported together.
absl::StatusOr<PreflightReport> CheckBeforeTraining(const Recipe& recipe,
                                                    const PluginRegistry& registry,
                                                    const MeshShape& shape,
                                                    const PreflightOptions& options = {});

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_PREFLIGHT_H_
