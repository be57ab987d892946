// The job plan: everything a run needs from its recipe, read once, typed, checked and derived,
// with the plugins the job uses chosen by kind (a parallel plugin by the mesh dimension it
// serves, a checkpoint or comm plugin by what it can do), never by name. `titan-run --validate`
// builds the plan and stops; a run builds the same plan and trains from it, so the two make the
// same checks. Nothing after the plan reads the recipe by key; the plugins read their own keys
// through the SDK's config view when the recipe loads them.
#ifndef TITAN_CORE_TRAIN_JOB_PLAN_H_
#define TITAN_CORE_TRAIN_JOB_PLAN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/fault_tolerance/fault_tolerance_settings.h"
#include "core/model/activation_checkpoint.h"
#include "core/model/config.h"
#include "core/model/model_family.h"
#include "core/runtime/control_plane/control_plane.h"
#include "core/runtime/observability.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/recipe.h"
#include "core/train/checkpointer.h"
#include "core/train/generate.h"
#include "core/train/training_data.h"
#include "titan/comm.h"
#include "titan/device.h"
#include "titan/device_mesh.h"
#include "titan/float8.h"
#include "titan/optimizer.h"
#include "titan/parallel.h"

namespace titan {

// [job]
struct JobSettings {
  std::string dump_folder;
  std::string description;
  std::string device_name;         // job.device
  DevicePlugin* device = nullptr;  // its plugin, owned by the recipe
};

// [model]
struct ModelSettings {
  const ModelFamily* family = &LlamaFamily();  // model.name's
  std::string flavor;
  // The flavor's shape; its vocab_size is the tokenizer's once the data is loaded.
  LlamaConfig config;
};

// [training], [optimizer] (the core's keys; the plugin reads its own), [lr_scheduler], [debug]
struct TrainingSettings {
  int64_t local_batch_size = 0;
  int64_t global_batch_size = 0;  // resolved: -1 in the recipe becomes local x data-parallel
  int64_t seq_len = 0;
  int64_t steps = 0;
  double max_norm = 0;
  std::string dataset;                   // a name for the log
  DType matmul_dtype = DType::kF32;      // mixed_precision_param
  OptimizerPlugin* optimizer = nullptr;  // optimizer.name's plugin, owned by the recipe
  double peak_lr = 0;                    // optimizer.lr
  int64_t warmup_steps = 0;              // [lr_scheduler]
  double decay_ratio = 1;
  std::string decay_type;
  double min_lr_factor = 0;
  int64_t seed = 0;  // debug.seed
};

// [validation]
struct ValidationSettings {
  int64_t freq = 0;   // 0: never
  int64_t steps = 0;  // global batches per validation
};

// [parallelism]: the mesh and the parallel plugins it needs, created once and configured with
// the section (they check their own keys).
struct ParallelismPlan {
  MeshShape shape;
  int64_t shard_degree_setting = -1;  // data_parallel_shard_degree as written (-1: what is left)
  int64_t pipeline_microbatch_size = 1;
  int data_parallel_degree = 1;       // dp_replicate x dp_shard
  int64_t accumulation = 1;           // microbatches per optimizer step
  int64_t pipeline_microbatches = 1;  // per local batch, under pp
  // In the order they apply (TorchTitan's): pp, tp and cp for each of them whose degree is above
  // 1, then dp_shard's plugin (fsdp; HSDP when dp_replicate > 1 too) when dp_shard > 1, else
  // dp_replicate's (ddp) when that is above 1, else none: TorchTitan's choice.
  std::vector<std::unique_ptr<ParallelPlugin>> plugins;

  // The first plugin, in the order they apply, that takes a role (ParallelPlugin's accessors,
  // e.g. &ParallelPlugin::pipeline), or null when none does.
  template <typename Role>
  Role* Find(Role* (ParallelPlugin::*role)()) const {
    for (const std::unique_ptr<ParallelPlugin>& plugin : plugins) {
      if (Role* found = (plugin.get()->*role)(); found != nullptr) return found;
    }
    return nullptr;
  }
  PipelineRole* pipeline() const { return Find(&ParallelPlugin::pipeline); }
  DataParallelRole* data_parallel() const { return Find(&ParallelPlugin::data_parallel); }
};

// [float8], when model.converters includes "float8"
struct Float8Settings {
  const Float8Plugin* plugin = nullptr;  // null: no Float8 layers; owned by the recipe
  std::string recipe_name;
  bool gather_in_float8 = false;   // enable_fsdp_float8_all_gather
  bool precompute_scales = false;  // precompute_float8_dynamic_scale_for_fsdp
};

// [metrics]
struct MetricsSettings {
  int64_t log_freq = 1;
  double peak_tflops = 0;  // 0: measured or the CPU's theoretical peak
  TensorBoardOptions tensorboard;
};

// [comm]
struct CommSettings {
  std::string backend;  // as written; "auto" for none on one rank, else a host communicator
  CommPlugin* plugin = nullptr;  // the one the job joins through; null on one rank with "auto"
  std::unique_ptr<CommPlugin> auto_plugin;  // "auto"'s choice, owned here
};

// [generate]
struct GenerateSettings {
  int64_t max_new_tokens = 0;  // 0: no sample
  std::string prompt;
  SamplingOptions sampling;
};

struct PlanOptions {
  // --validate: reads the data as the run's LoadData does (rank 0's share; a learned
  // vocabulary is not written), then checks the vocabulary against the tp degree and the
  // checkpoint the run would start from against the model, with the code the run checks them
  // with once it has read the data (LoadData, BuildModel).
  bool read_data = false;
  // Bytes of memory one rank may use; 0: this machine's physical memory.
  int64_t memory_bytes = 0;
  // False when the world is counted from the degrees, not launched (--validate without a
  // launcher): a data_parallel_shard_degree of -1 then stands for whatever the launch gives.
  bool launched_world = true;
};

struct JobPlan {
  JobSettings job;
  ModelSettings model;
  TrainingSettings training;
  TrainingDataOptions data;
  ValidationSettings validation;
  ParallelismPlan parallelism;
  CheckpointSettings checkpoint;
  ActivationCheckpoint activation_checkpoint;
  Float8Settings float8;
  MetricsSettings metrics;
  ProfilingOptions profiling;
  CommSettings comm;
  ControlPlaneOptions control_plane;
  GenerateSettings generate;
  FaultToleranceSettings fault_tolerance;

  std::vector<std::string> warnings;   // legal but probably not meant
  std::vector<std::string> unchecked;  // what only the run can check, and why
};

// The data-parallel rank the data is read as, of this launch's `in_group` rank: under fault
// tolerance a replica group's ranks follow those of the groups before it, so that groups that all
// live read the data as one launch with data_parallel_replicate_degree = group_size would.
int JobDataParallelRank(const JobPlan& plan, int in_group);
// The data-parallel ranks the data is split over: the launch's, times the replica groups.
int JobDataParallelDegree(const JobPlan& plan);

// Reads every core key of `recipe` (which must outlive the plan: the plugins it selected are
// used through the plan) for a job of `shape`, creates the parallel plugins and the comm plugin
// "auto" stands for, and makes every check the run makes before it starts: sizes against int64
// and memory, the model's shapes against the tp degree, the pipeline's stages and schedule, the
// plugins' needs against each other. All problems are reported together.
absl::StatusOr<JobPlan> BuildJobPlan(const Recipe& recipe, const PluginRegistry& registry,
                                     const MeshShape& shape, const PlanOptions& options = {});

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_JOB_PLAN_H_
