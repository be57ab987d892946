#include "core/train/plan_plugins.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/train/parallel_plugins.h"

namespace titan {

std::string WhereSet(const Recipe& recipe, const std::string& section, const std::string& key) {
  const std::string where = recipe.section(section).Where(key);
  return where == "default" ? absl::StrCat(recipe.source(), ": (default value)") : where;
}

// The parallel plugins the mesh needs, each chosen by the dimension it serves: cp needs seq_len
// to split into 2 x cp mirrored chunks, tp (sequence parallel) into tp parts. The data-parallel
// plugin is TorchTitan's choice: dp_shard's (fsdp; HSDP when dp_replicate > 1 too) whenever
// dp_shard > 1, dp_replicate's (ddp) for dp_replicate alone, none on one data-parallel rank.
void CreateParallelPlugins(const Recipe& recipe, const PluginRegistry& registry, JobPlan& plan,
                           std::vector<std::string>& problems) {
  ParallelismPlan& parallel = plan.parallelism;
  const MeshShape& shape = parallel.shape;
  const ConfigView& section = recipe.section("parallelism");
  const int64_t seq_len = plan.training.seq_len;
  std::unique_ptr<ParallelPlugin> pipeline, context_parallel, data_parallel, tensor_parallel,
      expert_parallel;
  auto create = [&](MeshDim dim, std::unique_ptr<ParallelPlugin>& into) {
    absl::StatusOr<std::unique_ptr<ParallelPlugin>> plugin =
        CreateParallelPluginFor(dim, registry, section);
    if (plugin.ok()) {
      into = std::move(*plugin);
    } else {
      problems.emplace_back(plugin.status().message());
    }
  };
  if (shape.degree(MeshDim::kPp) > 1) create(MeshDim::kPp, pipeline);
  if (const int cp = shape.degree(MeshDim::kCp); cp > 1) {
    const int64_t chunks = 2 * int64_t{cp};
    if (seq_len % chunks != 0) {
      problems.push_back(absl::StrCat("training.seq_len = ", seq_len, " is not divisible by ",
                                      chunks, " = 2 x parallelism.context_parallel_degree (", cp,
                                      "): each cp rank holds two mirrored chunks of every "
                                      "sequence"));
    } else {
      create(MeshDim::kCp, context_parallel);
    }
  }
  // ep borrows dp_shard x cp's ranks (preflight's CheckExpertParallel says when it can).
  if (shape.degree(MeshDim::kEp) > 1) create(MeshDim::kEp, expert_parallel);
  if (shape.degree(MeshDim::kDpShard) > 1) {
    create(MeshDim::kDpShard, data_parallel);
  } else if (shape.degree(MeshDim::kDpReplicate) > 1) {
    create(MeshDim::kDpReplicate, data_parallel);
  }
  if (const int tp = shape.degree(MeshDim::kTp); tp > 1) {
    if (seq_len % tp != 0) {
      problems.push_back(absl::StrCat(
          "training.seq_len = ", seq_len,
          " is not divisible by parallelism.tensor_parallel_degree = ", tp,
          " (sequence parallel gives each tensor-parallel rank seq_len / ", tp, " tokens)"));
    } else {
      create(MeshDim::kTp, tensor_parallel);
    }
  }
  // TorchTitan's order of applying them: the pp split, tp, cp, ep, then fsdp or ddp over the
  // tp- and ep-local tensors.
  for (std::unique_ptr<ParallelPlugin>* plugin :
       {&pipeline, &tensor_parallel, &context_parallel, &expert_parallel, &data_parallel}) {
    if (*plugin != nullptr) parallel.plugins.push_back(std::move(*plugin));
  }
}

// The pipeline plugin's own start-up checks (its stage split and its schedule against the pp
// ranks and the microbatches), made on the mesh's shape before the ranks join; the run plans
// again on the real mesh.
absl::Status CheckPipelinePlan(JobPlan& plan) {
  PipelineRole* pipeline = plan.parallelism.pipeline();
  if (pipeline == nullptr) return absl::OkStatus();
  const bool ordered =
      plan.comm.plugin != nullptr && !plan.comm.plugin->traits().unordered_point_to_point;
  PlanningMesh mesh(plan.parallelism.shape, *plan.job.device, ordered);
  return CallPluginOf(*pipeline, "PlanPipeline",
                      [&] {
                        return pipeline->PlanPipeline(
                            static_cast<int>(plan.model.config.n_layers),
                            static_cast<int>(plan.parallelism.pipeline_microbatches), mesh);
                      })
      .status();
}

// The comm plugin "auto" stands for on more than one rank: the one plugin on the plugin path
// that joins many ranks and moves any device's buffers (mpi), chosen by what it can do.
absl::Status ChooseAutoComm(const PluginRegistry& registry, const ConfigView& section,
                            CommSettings& comm) {
  std::vector<const PluginInfo*> fitting;
  std::unique_ptr<CommPlugin> chosen;
  for (const PluginInfo& info : registry.plugins()) {
    if (absl::string_view(info.descriptor->kind) != PluginKind<CommPlugin>::kName) continue;
    absl::StatusOr<std::unique_ptr<Plugin>> instance = Instantiate(info);
    if (!instance.ok()) continue;
    std::unique_ptr<CommPlugin> plugin(static_cast<CommPlugin*>(instance->release()));
    CommTraits traits;
    if (!CallPlugin(info, "traits",
                    [&] {
                      traits = plugin->traits();
                      return absl::OkStatus();
                    })
             .ok() ||
        !traits.joins_many_ranks || !traits.stages_through_host) {
      continue;
    }
    fitting.push_back(&info);
    if (chosen == nullptr) {
      TITAN_RETURN_IF_ERROR(
          CallPlugin(info, "Configure", [&] { return plugin->Configure(section); }));
      chosen = std::move(plugin);
    }
  }
  if (fitting.size() != 1) {
    std::vector<std::string> names;
    for (const PluginInfo* info : fitting) names.push_back(info->Describe());
    return absl::FailedPreconditionError(absl::StrCat(
        "comm.backend = \"auto\" on more than one rank needs one comm plugin that joins many "
        "ranks and moves host and device buffers alike; ",
        fitting.empty()
            ? "none is on the plugin path (the mpi plugin is one)"
            : absl::StrCat("found ", absl::StrJoin(names, " and "), ": name one in comm.backend")));
  }
  comm.auto_plugin = std::move(chosen);
  comm.plugin = comm.auto_plugin.get();
  return absl::OkStatus();
}

// The comm plugin against the job: device memory only needs an accelerator device, and
// point-to-point calls that block in issue order cannot carry pipeline stages.
void CheckComm(const Recipe& recipe, const JobPlan& plan, std::vector<std::string>& problems) {
  if (plan.comm.plugin == nullptr) return;
  const CommTraits traits = plan.comm.plugin->traits();
  const std::string where = WhereSet(recipe, "comm", "backend");
  if (!traits.stages_through_host && plan.job.device->type() == DeviceType::kCpu) {
    problems.push_back(absl::StrCat(
        where, ": comm.backend = \"", plan.comm.backend,
        "\" moves buffers in accelerator memory only, but job.device = \"", plan.job.device_name,
        "\" keeps them in host memory: use an accelerator device, or comm.backend = \"mpi\""));
  }
}

// A format that holds models only (Save refuses anything outside model/) may save only the
// final model: say so before training, not at the first save.
absl::Status CheckModelOnlyFormat(const JobPlan& plan) {
  const CheckpointSettings& checkpoint = plan.checkpoint;
  if (checkpoint.plugin == nullptr || checkpoint.plugin->holds_training_state()) {
    return absl::OkStatus();
  }
  const int64_t steps = plan.training.steps;
  std::string full_save;
  if (checkpoint.interval < steps) {
    full_save =
        absl::StrCat("checkpoint.interval = ", checkpoint.interval,
                     " saves the training state at step ", checkpoint.interval, " of ", steps);
  } else if (!checkpoint.last_model_only) {
    full_save = "checkpoint.last_save_model_only = false saves the training state at the end";
  }
  if (full_save.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "checkpoint.format = \"", checkpoint.format, "\" holds the model only, but ", full_save,
      ": use format = \"dcp\" for checkpoints to resume from, or export the final model with "
      "interval >= training.steps and last_save_model_only = true (titan-checkpoint convert "
      "also exports any dcp checkpoint)"));
}

}  // namespace titan
