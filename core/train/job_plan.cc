#include "core/train/job_plan.h"

#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/runtime/recipe_schema.h"
#include "core/train/plan_plugins.h"
#include "core/train/preflight.h"

namespace titan {
namespace {

std::string Under(const std::string& folder, const std::string& name) {
  return (std::filesystem::path(folder) / name).string();
}

// The plugin the recipe's `section` selected (the recipe validated the selection and owns the
// instance); null when the section selects none.
template <typename Interface>
Interface* Selected(const Recipe& recipe, absl::string_view section) {
  for (const Recipe::SelectedPlugin& plugin : recipe.plugins()) {
    if (plugin.section == section) return static_cast<Interface*>(plugin.instance.get());
  }
  return nullptr;
}

absl::Status ReadJob(const Recipe& recipe, JobSettings& job) {
  const ConfigView& section = recipe.section("job");
  TITAN_ASSIGN_OR_RETURN(job.dump_folder, section.GetString("dump_folder"));
  TITAN_ASSIGN_OR_RETURN(job.description, section.GetString("description"));
  TITAN_ASSIGN_OR_RETURN(job.device_name, section.GetString("device"));
  job.device = Selected<DevicePlugin>(recipe, "job");
  if (job.device == nullptr) return absl::InternalError("job.device selected no device plugin");
  return absl::OkStatus();
}

absl::Status ReadTraining(const Recipe& recipe, TrainingSettings& training) {
  const ConfigView& section = recipe.section("training");
  TITAN_ASSIGN_OR_RETURN(training.local_batch_size, section.GetInt("local_batch_size"));
  TITAN_ASSIGN_OR_RETURN(training.global_batch_size, section.GetInt("global_batch_size"));
  TITAN_ASSIGN_OR_RETURN(training.seq_len, section.GetInt("seq_len"));
  TITAN_ASSIGN_OR_RETURN(training.steps, section.GetInt("steps"));
  TITAN_ASSIGN_OR_RETURN(training.max_norm, section.GetFloat("max_norm"));
  TITAN_ASSIGN_OR_RETURN(training.dataset, section.GetString("dataset"));
  // mixed_precision_reduce accepts only "float32": gradients are always reduced in f32.
  TITAN_ASSIGN_OR_RETURN(std::string param, section.GetString("mixed_precision_param"));
  training.matmul_dtype = param == "bfloat16" ? DType::kBF16 : DType::kF32;
  training.optimizer = Selected<OptimizerPlugin>(recipe, "optimizer");
  if (training.optimizer == nullptr) {
    return absl::InternalError("optimizer.name selected no optimizer plugin");
  }
  TITAN_ASSIGN_OR_RETURN(training.peak_lr, recipe.section("optimizer").GetFloat("lr"));
  const ConfigView& lr = recipe.section("lr_scheduler");
  TITAN_ASSIGN_OR_RETURN(training.warmup_steps, lr.GetInt("warmup_steps"));
  TITAN_ASSIGN_OR_RETURN(training.decay_ratio, lr.GetFloat("decay_ratio"));
  TITAN_ASSIGN_OR_RETURN(training.decay_type, lr.GetString("decay_type"));
  TITAN_ASSIGN_OR_RETURN(training.min_lr_factor, lr.GetFloat("min_lr_factor"));
  TITAN_ASSIGN_OR_RETURN(training.seed, recipe.section("debug").GetInt("seed"));
  return absl::OkStatus();
}

absl::Status ReadData(const Recipe& recipe, const JobPlan& plan, TrainingDataOptions& data) {
  TITAN_ASSIGN_OR_RETURN(data.dataset_path, recipe.section("training").GetString("dataset_path"));
  TITAN_ASSIGN_OR_RETURN(data.tokenizer_path, recipe.section("model").GetString("tokenizer_path"));
  const ConfigView& section = recipe.section("data");
  TITAN_ASSIGN_OR_RETURN(std::string format, section.GetString("format"));
  data.pretokenized = format == "tokens";
  TITAN_ASSIGN_OR_RETURN(data.documents.text_field, section.GetString("text_field"));
  TITAN_ASSIGN_OR_RETURN(data.documents.text_separator, section.GetString("text_separator"));
  TITAN_ASSIGN_OR_RETURN(std::string on_bad, section.GetString("on_bad_record"));
  data.documents.skip_bad_records = on_bad == "skip";
  TITAN_ASSIGN_OR_RETURN(data.bpe_vocab_size, section.GetInt("bpe_vocab_size"));
  TITAN_ASSIGN_OR_RETURN(data.validation_split, recipe.section("validation").GetFloat("split"));
  data.validation = plan.validation.freq > 0;
  data.dump_folder = plan.job.dump_folder;
  data.local_batch_size = plan.training.local_batch_size;
  data.seq_len = plan.training.seq_len;
  data.seed = static_cast<uint64_t>(plan.training.seed);
  return absl::OkStatus();
}

absl::Status ReadCheckpoint(const Recipe& recipe, const PluginRegistry& registry,
                            const JobSettings& job, CheckpointSettings& checkpoint) {
  const ConfigView& section = recipe.section("checkpoint");
  TITAN_ASSIGN_OR_RETURN(bool enable, section.GetBool("enable"));
  TITAN_ASSIGN_OR_RETURN(checkpoint.format, section.GetString("format"));
  if (enable) {
    checkpoint.plugin = Selected<CheckpointPlugin>(recipe, "checkpoint");
    if (checkpoint.plugin == nullptr) {
      return absl::InternalError("checkpoint.enable is set but no checkpoint plugin was loaded");
    }
  }
  checkpoint.registry = &registry;
  TITAN_ASSIGN_OR_RETURN(std::string folder, section.GetString("folder"));
  checkpoint.root = Under(job.dump_folder, folder);
  TITAN_ASSIGN_OR_RETURN(checkpoint.interval, section.GetInt("interval"));
  TITAN_ASSIGN_OR_RETURN(checkpoint.keep_latest_k, section.GetInt("keep_latest_k"));
  TITAN_ASSIGN_OR_RETURN(checkpoint.load_step, section.GetInt("load_step"));
  TITAN_ASSIGN_OR_RETURN(std::string async_mode, section.GetString("async_mode"));
  checkpoint.async = async_mode == "async";
  TITAN_ASSIGN_OR_RETURN(checkpoint.last_model_only, section.GetBool("last_save_model_only"));
  TITAN_ASSIGN_OR_RETURN(std::string dtype, section.GetString("export_dtype"));
  checkpoint.export_dtype = dtype == "bfloat16"  ? DType::kBF16
                            : dtype == "float16" ? DType::kF16
                                                 : DType::kF32;
  TITAN_ASSIGN_OR_RETURN(checkpoint.exclude, section.GetStringList("exclude_from_loading"));
  TITAN_ASSIGN_OR_RETURN(checkpoint.initial_load_path, section.GetString("initial_load_path"));
  return absl::OkStatus();
}

absl::Status ReadFloat8(const Recipe& recipe, Float8Settings& float8) {
  // The float8 section selects a plugin only when model.converters includes "float8".
  float8.plugin = Selected<Float8Plugin>(recipe, "float8");
  const ConfigView& section = recipe.section("float8");
  TITAN_ASSIGN_OR_RETURN(float8.recipe_name, section.GetString("recipe_name"));
  TITAN_ASSIGN_OR_RETURN(float8.gather_in_float8, section.GetBool("enable_fsdp_float8_all_gather"));
  TITAN_ASSIGN_OR_RETURN(float8.precompute_scales,
                         section.GetBool("precompute_float8_dynamic_scale_for_fsdp"));
  return absl::OkStatus();
}

absl::Status ReadObservability(const Recipe& recipe, const JobSettings& job,
                               MetricsSettings& metrics, ProfilingOptions& profiling) {
  const ConfigView& section = recipe.section("metrics");
  TITAN_ASSIGN_OR_RETURN(metrics.log_freq, section.GetInt("log_freq"));
  TITAN_ASSIGN_OR_RETURN(metrics.peak_tflops, section.GetFloat("peak_tflops"));
  TITAN_ASSIGN_OR_RETURN(metrics.tensorboard.enable, section.GetBool("enable_tensorboard"));
  TITAN_ASSIGN_OR_RETURN(metrics.tensorboard.all_ranks, section.GetBool("save_for_all_ranks"));
  TITAN_ASSIGN_OR_RETURN(std::string tb_folder, section.GetString("save_tb_folder"));
  metrics.tensorboard.folder = Under(job.dump_folder, tb_folder);
  const ConfigView& p = recipe.section("profiling");
  TITAN_ASSIGN_OR_RETURN(profiling.traces, p.GetBool("enable_profiling"));
  TITAN_ASSIGN_OR_RETURN(profiling.memory_snapshots, p.GetBool("enable_memory_snapshot"));
  TITAN_ASSIGN_OR_RETURN(profiling.freq, p.GetInt("profile_freq"));
  TITAN_ASSIGN_OR_RETURN(std::string traces, p.GetString("save_traces_folder"));
  TITAN_ASSIGN_OR_RETURN(std::string snapshots, p.GetString("save_memory_snapshot_folder"));
  profiling.traces_folder = Under(job.dump_folder, traces);
  profiling.memory_folder = Under(job.dump_folder, snapshots);
  return absl::OkStatus();
}

// [control_plane]; listed controller ranks must be whole numbers.
absl::Status ReadControlPlane(const Recipe& recipe, const JobPlan& plan,
                              ControlPlaneOptions& control) {
  const ConfigView& section = recipe.section("control_plane");
  TITAN_ASSIGN_OR_RETURN(control.enable, section.GetBool("enable"));
  ControlPlacement& placement = control.placement;
  TITAN_ASSIGN_OR_RETURN(placement.topology_file, section.GetString("topology"));
  TITAN_ASSIGN_OR_RETURN(int64_t controllers, section.GetInt("controllers"));
  TITAN_ASSIGN_OR_RETURN(int64_t hops, section.GetInt("hops"));
  placement.controllers = static_cast<int>(controllers);
  placement.hops = static_cast<int>(hops);
  TITAN_ASSIGN_OR_RETURN(std::vector<std::string> listed,
                         section.GetStringList("controller_ranks"));
  for (const std::string& item : listed) {
    int rank = 0;
    if (!absl::SimpleAtoi(item, &rank)) {
      return absl::InvalidArgumentError(absl::StrCat(section.Where("controller_ranks"),
                                                     ": control_plane.controller_ranks: \"", item,
                                                     "\" is not a rank number"));
    }
    placement.listed_ranks.push_back(rank);
  }
  ControlSettings& settings = control.settings;
  settings.policy = Selected<BalancePlugin>(recipe, "control_plane");
  for (const Recipe::SelectedPlugin& plugin : recipe.plugins()) {
    if (plugin.section == "control_plane") settings.policy_name = plugin.info->descriptor->name;
  }
  TITAN_ASSIGN_OR_RETURN(settings.rebalance_threshold, section.GetFloat("rebalance_threshold"));
  TITAN_ASSIGN_OR_RETURN(settings.heartbeat_timeout_s,
                         section.GetFloat("heartbeat_timeout_seconds"));
  TITAN_ASSIGN_OR_RETURN(settings.straggler_factor, section.GetFloat("straggler_factor"));
  TITAN_ASSIGN_OR_RETURN(control.debug_slow_rank, section.GetInt("debug_slow_rank"));
  TITAN_ASSIGN_OR_RETURN(control.debug_slow_seconds, section.GetFloat("debug_slow_seconds"));
  TITAN_ASSIGN_OR_RETURN(int64_t lose, section.GetInt("debug_lose_controller"));
  settings.lose_controller = static_cast<int>(lose);
  TITAN_ASSIGN_OR_RETURN(settings.lose_at_step, section.GetInt("debug_lose_at_step"));
  settings.log_freq = plan.metrics.log_freq;
  settings.jsonl_path = Under(plan.job.dump_folder, "control_plane.jsonl");
  return absl::OkStatus();
}

// [fault_tolerance]'s DiLoCo keys (TorchTitan's names, and the outer optimizer's, which
// TorchTitan fixes at lr 0.7 and Nesterov momentum 0.9). Streaming DiLoCo (fragments synced in
// turn, overlapped with the inner steps) and quantized syncs are refused by name.
absl::Status ReadDiloco(const ConfigView& section, FaultToleranceSettings& ft) {
  const char* const kDilocoKeys[] = {
      "outer_lr",      "outer_momentum",      "fragment_update_alpha",
      "num_fragments", "fragment_sync_delay", "should_quantize"};
  if (!ft.diloco) {
    for (const char* key : kDilocoKeys) {
      if (section.Where(key) != "default") {
        return section.Error(key, "applies to semi_sync_method = \"diloco\" only");
      }
    }
    return absl::OkStatus();
  }
  TITAN_ASSIGN_OR_RETURN(ft.outer_lr, section.GetFloat("outer_lr"));
  TITAN_ASSIGN_OR_RETURN(ft.outer_momentum, section.GetFloat("outer_momentum"));
  TITAN_ASSIGN_OR_RETURN(ft.fragment_update_alpha, section.GetFloat("fragment_update_alpha"));
  TITAN_ASSIGN_OR_RETURN(int64_t fragments, section.GetInt("num_fragments"));
  TITAN_ASSIGN_OR_RETURN(int64_t delay, section.GetInt("fragment_sync_delay"));
  TITAN_ASSIGN_OR_RETURN(bool quantize, section.GetBool("should_quantize"));
  if (fragments != 1) {
    return section.Error("num_fragments",
                         "streaming DiLoCo (fragments of the model synced in turn) is not "
                         "implemented yet: every sync takes the whole model (1)");
  }
  if (delay != 0) {
    return section.Error("fragment_sync_delay",
                         "a sync overlapped with the next inner steps is not implemented yet: "
                         "each sync completes at its step (0)");
  }
  if (quantize) {
    return section.Error("should_quantize",
                         "the pseudo-gradients are averaged in f32; quantizing them is not "
                         "implemented yet (false)");
  }
  return absl::OkStatus();
}

// Each key of `section_name` set by the recipe or the command line, other than `enable_key`,
// while the section is off: a warning naming it (the run takes none of them).
void WarnKeysOfDisabledSection(const Recipe& recipe, absl::string_view section_name,
                               absl::string_view enable_key, std::vector<std::string>& warnings) {
  const ConfigView& section = recipe.section(section_name);
  for (const SectionSchema& schema : RecipeSchema()) {
    if (schema.name != section_name) continue;
    for (const ConfigKey& key : schema.keys) {
      if (key.name == enable_key || section.Where(key.name) == "default") continue;
      warnings.push_back(absl::StrCat(section.Where(key.name), ": ", section_name, ".", key.name,
                                      " has no effect with ", section_name, ".", enable_key,
                                      " = false"));
    }
  }
}

// [fault_tolerance]. What is not implemented yet is refused by name, never taken and ignored.
absl::Status ReadFaultTolerance(const Recipe& recipe, FaultToleranceSettings& ft,
                                std::vector<std::string>& warnings) {
  const ConfigView& section = recipe.section("fault_tolerance");
  TITAN_ASSIGN_OR_RETURN(ft.enable, section.GetBool("enable"));
  if (!ft.enable) {
    WarnKeysOfDisabledSection(recipe, "fault_tolerance", "enable", warnings);
    return absl::OkStatus();
  }
  TITAN_ASSIGN_OR_RETURN(int64_t replica_id, section.GetInt("replica_id"));
  TITAN_ASSIGN_OR_RETURN(int64_t group_size, section.GetInt("group_size"));
  TITAN_ASSIGN_OR_RETURN(int64_t min_size, section.GetInt("min_replica_size"));
  ft.replica_id = static_cast<int>(replica_id);
  ft.group_size = static_cast<int>(group_size);
  ft.min_replica_size = static_cast<int>(min_size);
  TITAN_ASSIGN_OR_RETURN(ft.store_folder, section.GetString("store_folder"));
  TITAN_ASSIGN_OR_RETURN(int64_t gloo_ms, section.GetInt("process_group_timeout_ms"));
  TITAN_ASSIGN_OR_RETURN(int64_t heartbeat_ms, section.GetInt("heartbeat_timeout_ms"));
  TITAN_ASSIGN_OR_RETURN(int64_t join_ms, section.GetInt("join_timeout_ms"));
  ft.process_group_timeout = std::chrono::milliseconds(gloo_ms);
  ft.heartbeat_timeout = std::chrono::milliseconds(heartbeat_ms);
  ft.join_timeout = std::chrono::milliseconds(join_ms);
  if (group_size < 1) {
    return section.Error("group_size", "give the number of replica groups (>= 1) with enable");
  }
  if (replica_id >= group_size) {
    return section.Error("replica_id",
                         absl::StrCat(replica_id, " is not a group of group_size = ", group_size,
                                      ": expected 0 .. ", group_size - 1));
  }
  if (min_size > group_size) {
    return section.Error("min_replica_size", absl::StrCat(min_size,
                                                          " groups can never be alive "
                                                          "of group_size = ",
                                                          group_size));
  }
  TITAN_ASSIGN_OR_RETURN(ft.etcd_endpoints, section.GetStringList("etcd_endpoints"));
  TITAN_ASSIGN_OR_RETURN(ft.etcd_prefix, section.GetString("etcd_prefix"));
  if (ft.store_folder.empty() == ft.etcd_endpoints.empty()) {
    return section.Error(ft.store_folder.empty() ? "store_folder" : "etcd_endpoints",
                         "give either a folder every group reaches, new for each run, or the "
                         "endpoints of an etcd cluster (store_folder or etcd_endpoints: where the "
                         "quorum and the rendezvous of the groups' communicator live)");
  }
  for (const std::string& endpoint : ft.etcd_endpoints) {
    if (endpoint.rfind("http://", 0) != 0 && endpoint.rfind("https://", 0) != 0) {
      return section.Error("etcd_endpoints", absl::StrCat("\"", endpoint,
                                                          "\": expected a URL such as "
                                                          "http://node0:2379"));
    }
  }
  if (!ft.etcd_endpoints.empty() && (ft.etcd_prefix.empty() || ft.etcd_prefix[0] != '/')) {
    return section.Error("etcd_prefix",
                         "expected a key prefix starting with '/', e.g. /titan/run-1");
  }
  TITAN_ASSIGN_OR_RETURN(std::string semi_sync, section.GetString("semi_sync_method"));
  if (!semi_sync.empty()) {
    TITAN_ASSIGN_OR_RETURN(ft.sync_steps, section.GetInt("sync_steps"));
  } else if (section.Where("sync_steps") != "default") {
    return section.Error("sync_steps",
                         "applies to semi_sync_method = \"local_sgd\" or \"diloco\" only; "
                         "without one every step averages the gradients");
  }
  ft.diloco = semi_sync == "diloco";
  return ReadDiloco(section, ft);
}

absl::Status ReadGenerate(const Recipe& recipe, GenerateSettings& generate) {
  const ConfigView& section = recipe.section("generate");
  TITAN_ASSIGN_OR_RETURN(generate.max_new_tokens, section.GetInt("max_new_tokens"));
  TITAN_ASSIGN_OR_RETURN(generate.prompt, section.GetString("prompt"));
  TITAN_ASSIGN_OR_RETURN(generate.sampling.temperature, section.GetFloat("temperature"));
  TITAN_ASSIGN_OR_RETURN(generate.sampling.top_k, section.GetInt("top_k"));
  TITAN_ASSIGN_OR_RETURN(generate.sampling.top_p, section.GetFloat("top_p"));
  return absl::OkStatus();
}

// [activation_checkpoint]; a setting with no effect is a warning.
absl::Status ReadActivationCheckpoint(const Recipe& recipe, JobPlan& plan) {
  const ConfigView& ac = recipe.section("activation_checkpoint");
  TITAN_ASSIGN_OR_RETURN(std::string mode, ac.GetString("mode"));
  TITAN_ASSIGN_OR_RETURN(std::string option, ac.GetString("selective_ac_option"));
  absl::StatusOr<ActivationCheckpoint> parsed = ParseActivationCheckpoint(mode, option);
  if (!parsed.ok()) {
    // A default value is named by the recipe file.
    const std::string where = ac.Where("selective_ac_option") == "default"
                                  ? absl::StrCat(recipe.source(), ": (default value)")
                                  : ac.Where("selective_ac_option");
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", parsed.status().message()));
  }
  plan.activation_checkpoint = *parsed;
  if (mode != "selective" && ac.Where("selective_ac_option") != "default") {
    plan.warnings.push_back(absl::StrCat(
        ac.Where("selective_ac_option"), ": activation_checkpoint.selective_ac_option = \"", option,
        "\" has no effect with activation_checkpoint.mode = \"", mode, "\""));
  }
  return absl::OkStatus();
}

// Every core key, typed; the checks come after.
absl::Status ReadRecipe(const Recipe& recipe, const PluginRegistry& registry, JobPlan& plan) {
  TITAN_RETURN_IF_ERROR(ReadJob(recipe, plan.job));
  TITAN_ASSIGN_OR_RETURN(const std::string family, recipe.section("model").GetString("name"));
  TITAN_ASSIGN_OR_RETURN(plan.model.family, ModelFamilyNamed(family));
  TITAN_ASSIGN_OR_RETURN(plan.model.flavor, recipe.section("model").GetString("flavor"));
  TITAN_RETURN_IF_ERROR(ReadTraining(recipe, plan.training));
  const ConfigView& validation = recipe.section("validation");
  TITAN_ASSIGN_OR_RETURN(plan.validation.freq, validation.GetInt("freq"));
  TITAN_ASSIGN_OR_RETURN(plan.validation.steps, validation.GetInt("steps"));
  TITAN_RETURN_IF_ERROR(ReadData(recipe, plan, plan.data));
  TITAN_RETURN_IF_ERROR(ReadCheckpoint(recipe, registry, plan.job, plan.checkpoint));
  TITAN_RETURN_IF_ERROR(ReadFloat8(recipe, plan.float8));
  TITAN_RETURN_IF_ERROR(ReadObservability(recipe, plan.job, plan.metrics, plan.profiling));
  TITAN_RETURN_IF_ERROR(ReadControlPlane(recipe, plan, plan.control_plane));
  TITAN_RETURN_IF_ERROR(ReadGenerate(recipe, plan.generate));
  TITAN_RETURN_IF_ERROR(ReadFaultTolerance(recipe, plan.fault_tolerance, plan.warnings));
  const ConfigView& parallelism = recipe.section("parallelism");
  TITAN_ASSIGN_OR_RETURN(plan.parallelism.shard_degree_setting,
                         parallelism.GetInt("data_parallel_shard_degree"));
  TITAN_ASSIGN_OR_RETURN(plan.parallelism.pipeline_microbatch_size,
                         parallelism.GetInt("pipeline_parallel_microbatch_size"));
  TITAN_ASSIGN_OR_RETURN(plan.comm.backend, recipe.section("comm").GetString("backend"));
  plan.comm.plugin = Selected<CommPlugin>(recipe, "comm");
  return absl::OkStatus();
}

// The pp plugin reads pipeline_parallel_layers_per_stage and takes any value below 1 for its own
// split (-1, the default); 0 asks for stages of no layer, which is no split at all: refused.
void CheckLayersPerStage(const Recipe& recipe, std::vector<std::string>& problems) {
  constexpr char kKey[] = "pipeline_parallel_layers_per_stage";
  absl::StatusOr<int64_t> per_stage = recipe.section("parallelism").GetInt(kKey);
  if (!per_stage.ok() || *per_stage != 0) return;
  problems.push_back(absl::StrCat(WhereSet(recipe, "parallelism", kKey), ": parallelism.", kKey,
                                  " = 0: a stage holds at least 1 layer; give a count >= 1, or "
                                  "-1 (the default) for the schedule's own split"));
}

}  // namespace

int JobDataParallelRank(const JobPlan& plan, int in_group) {
  const FaultToleranceSettings& ft = plan.fault_tolerance;
  return ft.enable ? ft.replica_id * plan.parallelism.data_parallel_degree + in_group : in_group;
}

int JobDataParallelDegree(const JobPlan& plan) {
  const FaultToleranceSettings& ft = plan.fault_tolerance;
  return plan.parallelism.data_parallel_degree * (ft.enable ? ft.group_size : 1);
}

absl::StatusOr<JobPlan> BuildJobPlan(const Recipe& recipe, const PluginRegistry& registry,
                                     const MeshShape& shape, const PlanOptions& options) {
  JobPlan plan;
  plan.parallelism.shape = shape;
  TITAN_RETURN_IF_ERROR(ReadRecipe(recipe, registry, plan));
  std::vector<std::string> problems;
  CheckLayersPerStage(recipe, problems);
  TITAN_RETURN_IF_ERROR(PlanAndCheck(recipe, registry, options, plan, problems));
  if (absl::Status ac = ReadActivationCheckpoint(recipe, plan); !ac.ok()) {
    problems.emplace_back(ac.message());
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        problems.size() == 1 ? "" : absl::StrCat(problems.size(), " problems in the recipe:\n"),
        absl::StrJoin(problems, "\n")));
  }
  return plan;
}

}  // namespace titan
