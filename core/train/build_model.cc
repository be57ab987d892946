// The phases before the first step: LoadData, BuildModel, ApplyParallelism, LoadOrInit.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/runtime/plugin_registry.h"
#include "core/train/preflight.h"
#include "core/train/training_job.h"

namespace titan {
namespace {

// What fsdp gathers in which format (Parameter::compute_dtype), for the log.
std::string DescribeGatherFormats(const std::vector<Parameter>& parameters) {
  std::map<DType, std::pair<int, int64_t>> by_format;  // parameters, elements
  int64_t elements = 0, bytes = 0;
  for (const Parameter& p : parameters) {
    auto& [count, numel] = by_format[p.compute_dtype];
    ++count;
    numel += p.value.numel();
    elements += p.value.numel();
    bytes += p.value.numel() * static_cast<int64_t>(DTypeSize(p.compute_dtype));
  }
  std::vector<std::string> parts;
  for (const auto& [dtype, entry] : by_format) {
    parts.push_back(absl::StrCat(entry.first, " in ", DTypeName(dtype)));
  }
  constexpr double kMib = 1 << 20;
  return absl::StrCat("gathers the parameters as they compute: ", absl::StrJoin(parts, ", "), "; ",
                      absl::SixDigits(static_cast<double>(bytes) / kMib),
                      " MiB per gather of the whole model, against ",
                      absl::SixDigits(static_cast<double>(elements) * 4 / kMib), " MiB in f32");
}

// Under pp, the stages of this rank, as the pipeline plugin places them on the mesh.
absl::StatusOr<PipelinePlan> PlaceStages(TrainingJob& job) {
  PipelineRole* pipeline = job.plan.parallelism.pipeline();
  if (pipeline == nullptr) return PipelinePlan{};
  TITAN_ASSIGN_OR_RETURN(PipelinePlan stages, CallPluginOf(*pipeline, "PlanPipeline", [&] {
                           return pipeline->PlanPipeline(
                               static_cast<int>(job.plan.model.config.n_layers),
                               static_cast<int>(job.plan.parallelism.pipeline_microbatches),
                               job.mesh);
                         }));
  for (const PipelineStage& stage : stages.local) {
    spdlog::info("[pp] stage {} of {}: layers {}..{}{}{}", stage.stage, stages.num_stages,
                 stage.first_layer, stage.end_layer, stage.stage == 0 ? " + embedding" : "",
                 stage.stage == stages.num_stages - 1 ? " + norm, output and loss" : "");
  }
  return stages;
}

// The Float8 plugin's layers in the model, where model.converters asks for them.
absl::Status ConvertToFloat8(TrainingJob& job) {
  const Float8Settings& float8 = job.plan.float8;
  if (float8.plugin == nullptr) return absl::OkStatus();
  TITAN_ASSIGN_OR_RETURN(std::vector<Float8LinearChoice> choices,
                         job.model->ConvertToFloat8(*float8.plugin, float8.gather_in_float8));
  for (const std::string& line :
       DescribeFloat8Linears(choices, float8.recipe_name, float8.plugin->Recipe())) {
    spdlog::info("{}", line);
  }
  if (float8.gather_in_float8) {
    spdlog::info("[float8] fsdp gathers the Float8 layers' weights in e4m3 with one scale each{}",
                 float8.precompute_scales
                     ? ", all scales computed in one pass after each optimizer step"
                     : ", each unit's scales reduced before its gather");
    if (std::any_of(choices.begin(), choices.end(), [](const auto& c) { return c.grouped; })) {
      spdlog::info(
          "[float8] fsdp gathers the routed experts' [experts, out, in] weights in high "
          "precision: float8.enable_fsdp_float8_all_gather casts a linear layer's 2-D weight "
          "with one scale, which grouped experts never take");
    }
  }
  return absl::OkStatus();
}

// The plugin that computes the Float8 gathers' scales after each optimizer step, when
// float8.precompute_float8_dynamic_scale_for_fsdp asks for it; else null.
absl::StatusOr<Float8GatherRole*> Float8ScalesToPrecompute(const JobPlan& plan) {
  if (plan.float8.plugin == nullptr || !plan.float8.precompute_scales) return nullptr;
  Float8GatherRole* gather = plan.parallelism.Find(&ParallelPlugin::float8_gather);
  if (gather == nullptr) {
    return absl::FailedPreconditionError(
        "float8.precompute_float8_dynamic_scale_for_fsdp = true, but no parallel plugin of this "
        "job gathers Float8 weights (fsdp does, when data_parallel_shard_degree > 1)");
  }
  return gather;
}

}  // namespace

int TrainingJob::data_parallel_rank() const {
  const int dp_shard = plan.parallelism.shape.degree(MeshDim::kDpShard);
  return JobDataParallelRank(
      plan, mesh.coordinate(MeshDim::kDpReplicate) * dp_shard + mesh.coordinate(MeshDim::kDpShard));
}

int TrainingJob::data_parallel_degree() const { return JobDataParallelDegree(plan); }

absl::Status JoinReplicaGroups(TrainingJob& job) {
  if (!job.plan.fault_tolerance.enable) return absl::OkStatus();
  TITAN_ASSIGN_OR_RETURN(job.replica_groups,
                         ReplicaGroups::Start(job.plan.fault_tolerance, job.mesh.world()));
  return absl::OkStatus();
}

absl::Status LoadData(TrainingJob& job) {
  TITAN_ASSIGN_OR_RETURN(
      job.data, LoadCheckedTrainingData(job.plan.data, job.plan, job.data_parallel_rank()));
  job.plan.model.config.vocab_size = job.data->tokenizer->vocab_size();
  return absl::OkStatus();
}

absl::Status BuildModel(TrainingJob& job) {
  ModelSettings& model = job.plan.model;
  TITAN_ASSIGN_OR_RETURN(job.checkpointer, Checkpointer::Create(job.plan.checkpoint, job.mesh));
  if (job.checkpointer != nullptr) {
    TITAN_RETURN_IF_ERROR(job.checkpointer->MatchModel(model.config, model.flavor));
  }
  job.where.device = &job.mesh.device();
  job.where.matmul_dtype = job.plan.training.matmul_dtype;
  TITAN_ASSIGN_OR_RETURN(PipelinePlan stages, PlaceStages(job));
  TITAN_ASSIGN_OR_RETURN(
      job.model, DecoderModel::Create(model.config, job.plan.activation_checkpoint, job.where,
                                      stages, *job.plan.model.family));
  spdlog::info("[device] {}; matmuls in {}", job.model->compute().Describe(),
               job.where.matmul_dtype == DType::kBF16
                   ? "bf16 with f32 accumulation (training.mixed_precision_param = \"bfloat16\")"
                   : "f32");
  TITAN_RETURN_IF_ERROR(ConvertToFloat8(job));
  TITAN_RETURN_IF_ERROR(job.model->Initialize(static_cast<uint64_t>(job.plan.training.seed)));
  spdlog::info("[model] {} {} with {} layers and vocabulary {}: {:.2f}M parameters",
               model.family->name(), model.flavor, model.config.n_layers, model.config.vocab_size,
               model.config.ParameterCount() / 1e6);
  if (model.config.moe.enabled()) {
    const MoeConfig& moe = model.config.moe;
    spdlog::info(
        "[model] a mixture of {} experts, {} per token, of {} hidden features{}, in layers {} to "
        "{}: {:.2f}M parameters active per token{}{}{}",
        moe.experts, moe.top_k, moe.hidden_dim,
        moe.shared_experts > 0 ? fmt::format(" and {} shared", moe.shared_experts) : "",
        moe.dense_layers, model.config.n_layers - 1, model.config.ActiveParameterCount() / 1e6,
        moe.load_balance_coeff > 0
            ? fmt::format("; the experts' load balanced by a score bias (coefficient {})",
                          moe.load_balance_coeff)
            : "",
        moe.force_balance ? "; the experts chosen round-robin (debug.moe_force_load_balance)" : "",
        moe.aux_loss_alpha > 0
            ? fmt::format("; a sequence-wise auxiliary loss of weight {}", moe.aux_loss_alpha)
            : "");
  }
  if (model.config.mla.enabled()) {
    const LatentAttentionConfig& a = model.config.mla;
    spdlog::info(
        "[model] multi-head latent attention: queries {}, keys and values from a latent of {}, "
        "heads of {} + {} rotated query and key features and {} value features; RoPE {}",
        a.q_lora_rank > 0 ? fmt::format("of rank {}", a.q_lora_rank) : std::string("full rank"),
        a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim,
        model.config.yarn.enabled()
            ? fmt::format("with YaRN (factor {} over {} positions)", model.config.yarn.factor,
                          model.config.yarn.original_seq_len)
            : std::string("unscaled"));
  }
  if (job.plan.parallelism.pipeline() != nullptr) {
    int64_t held = 0;
    for (const Parameter& p : job.model->Parameters()) held += p.value.numel();
    spdlog::info("[pp] this rank's stages hold {:.2f}M of them", static_cast<double>(held) / 1e6);
  }
  return absl::OkStatus();
}

absl::Status ApplyParallelism(TrainingJob& job) {
  ParallelismPlan& parallel = job.plan.parallelism;
  DeviceMesh& mesh = job.mesh;
  // In the plan's order, TorchTitan's: the pp split (made by BuildModel), tp, cp, then fsdp or
  // ddp over the tp-local tensors.
  for (const std::unique_ptr<ParallelPlugin>& plugin : parallel.plugins) {
    TITAN_RETURN_IF_ERROR(
        CallPluginOf(*plugin, "Apply", [&] { return plugin->Apply(job.model->root(), mesh); }));
    job.model->ReleaseUnusedStorage();
    if (plugin->dimension() == MeshDim::kTp) {
      for (const std::string& line : job.model->DescribeAsyncTensorParallel()) {
        spdlog::info("{}", line);
      }
    }
    if (plugin->dimension() == MeshDim::kDpShard) {
      spdlog::info("[fsdp] {}", DescribeGatherFormats(job.model->Parameters()));
    }
  }
  DataParallelContext context;
  context.data_parallel = parallel.data_parallel();
  context.loss_group = &mesh.world();
  context.token_groups = {&mesh.group_with_context(MeshDim::kDpShard),
                          &mesh.group(MeshDim::kDpReplicate)};
  // The last applied first: it keeps what the ones before it left on this rank.
  for (auto plugin = parallel.plugins.rbegin(); plugin != parallel.plugins.rend(); ++plugin) {
    if ((*plugin)->parameter_shards() != nullptr) {
      context.parameter_keepers.push_back(plugin->get());
    }
  }
  context.pipeline = parallel.pipeline();
  context.pipeline_group = &mesh.group(MeshDim::kPp);
  context.pipeline_microbatches = parallel.pipeline_microbatches;
  // A data-parallel plugin averages over its dimension flattened with cp.
  if (context.data_parallel == nullptr) context.context_group = &mesh.group(MeshDim::kCp);
  TITAN_ASSIGN_OR_RETURN(context.float8_scales, Float8ScalesToPrecompute(job.plan));
  context.replica_groups = job.replica_groups.get();
  const TrainingSettings& training = job.plan.training;
  TITAN_ASSIGN_OR_RETURN(
      job.train_step, TrainStep::Create(*job.model, *training.optimizer, training.local_batch_size,
                                        training.seq_len, parallel.accumulation, training.max_norm,
                                        std::move(context)));
  spdlog::info("[memory] parameters, gradients and optimizer state: {:.1f} MiB on this rank",
               static_cast<double>(job.train_step->state_bytes()) / (1 << 20));
  return absl::OkStatus();
}

absl::Status LoadOrInit(TrainingJob& job) {
  if (job.replica_groups != nullptr && job.replica_groups->joining()) {
    // A live group's state, not a checkpoint's: the run went on while this group was away.
    TITAN_RETURN_IF_ERROR(
        job.replica_groups
            ->Rejoin([&](const ReplicaGroups::Broadcast& broadcast) -> absl::Status {
              TITAN_ASSIGN_OR_RETURN(
                  job.resume, ShareTrainState(TrainStateOf(job), false, ResumePoint{}, broadcast));
              return absl::OkStatus();
            })
            .status());
  } else if (job.checkpointer != nullptr) {
    TITAN_ASSIGN_OR_RETURN(job.resume, job.checkpointer->Load(TrainStateOf(job)));
  }
  if (!job.resume.optimizer_restored) TITAN_RETURN_IF_ERROR(job.train_step->StartOuterState());
  // The scales of the weights as initialized or loaded; each optimizer step computes them anew.
  TITAN_ASSIGN_OR_RETURN(Float8GatherRole * float8_scales, Float8ScalesToPrecompute(job.plan));
  if (float8_scales != nullptr) {
    TITAN_RETURN_IF_ERROR(CallPluginOf(*float8_scales, "PrecomputeFloat8Scales",
                                       [&] { return float8_scales->PrecomputeFloat8Scales(); }));
  }
  return absl::OkStatus();
}

TrainState TrainStateOf(TrainingJob& job) {
  std::optional<PackedLoader>& eval = job.data->eval;
  return TrainState{job.model.get(),
                    &*job.train_step,
                    &job.data->train,
                    eval ? &*eval : nullptr,
                    job.plan.training.seed,
                    job.plan.training.seq_len,
                    /*bos_id=*/job.data->tokenizer->bos_id(),
                    /*eos_id=*/job.data->tokenizer->eos_id()};
}

}  // namespace titan
