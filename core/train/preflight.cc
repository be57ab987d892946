#include "core/train/preflight.h"

#include <unistd.h>

#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/data/tokenizer.h"
#include "core/runtime/control_plane/control_plane.h"
#include "core/train/checkpointer.h"
#include "core/train/plan_plugins.h"

namespace titan {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// a x b, or nullopt where it overflows int64.
std::optional<int64_t> Product(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

std::string KeyValue(const Recipe& recipe, const std::string& section, const std::string& key,
                     int64_t value) {
  return absl::StrCat(WhereSet(recipe, section, key), ": ", section, ".", key, " = ", value);
}

int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? Product(pages, page).value_or(kInt64Max) : kInt64Max;
}

// Microbatches per optimizer step: training.global_batch_size / (local_batch_size x the
// data-parallel degree), -1 meaning 1 (the plan's global batch is then resolved). Refuses a
// global batch that is not such a multiple, and sizes whose products (tokens per microbatch, per
// step, per run) overflow int64.
absl::StatusOr<int64_t> GradientAccumulation(const Recipe& recipe, JobPlan& plan) {
  TrainingSettings& training = plan.training;
  const int64_t batch = training.local_batch_size, seq_len = training.seq_len;
  const int64_t dp_degree = plan.parallelism.data_parallel_degree;
  std::optional<int64_t> per_microbatch = Product(batch, dp_degree);
  if (!per_microbatch) {
    return absl::OutOfRangeError(
        absl::StrCat(KeyValue(recipe, "training", "local_batch_size", batch), " x ", dp_degree,
                     " data-parallel ranks overflows int64 (the most is ", kInt64Max, ")"));
  }
  int64_t global_batch = training.global_batch_size;
  if (global_batch < 0) global_batch = *per_microbatch;
  if (global_batch == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(KeyValue(recipe, "training", "global_batch_size", 0),
                     ": a step trains at least one sequence; write -1 for local_batch_size x the "
                     "data-parallel ranks, or a multiple of that"));
  }
  if (global_batch % *per_microbatch != 0) {
    return absl::InvalidArgumentError(absl::StrCat("training.global_batch_size = ", global_batch,
                                                   " is not a multiple of local_batch_size ", batch,
                                                   " x ", dp_degree, " data-parallel rank(s)"));
  }
  std::optional<int64_t> step_tokens = Product(global_batch, seq_len);
  std::optional<int64_t> run_tokens =
      step_tokens ? Product(*step_tokens, training.steps) : std::nullopt;
  if (!run_tokens) {
    return absl::OutOfRangeError(absl::StrCat(
        KeyValue(recipe, "training", "global_batch_size", global_batch), " x seq_len ", seq_len,
        step_tokens ? absl::StrCat(" x steps ", training.steps) : "",
        " tokens overflow int64 (the most is ", kInt64Max, "): the run's token count is an int64"));
  }
  training.global_batch_size = global_batch;
  return global_batch / *per_microbatch;
}

// Pipeline microbatches per local batch: training.local_batch_size /
// parallelism.pipeline_parallel_microbatch_size (1 without pipeline parallelism); refuses a
// local batch that is not a multiple.
absl::StatusOr<int64_t> PipelineMicrobatches(const Recipe& recipe, const JobPlan& plan) {
  if (plan.parallelism.shape.degree(MeshDim::kPp) == 1) return 1;
  const int64_t batch = plan.training.local_batch_size;
  const int64_t size = plan.parallelism.pipeline_microbatch_size;
  if (batch % size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        KeyValue(recipe, "training", "local_batch_size", batch), " is not a multiple of ",
        KeyValue(recipe, "parallelism", "pipeline_parallel_microbatch_size", size),
        " (the pipeline splits each local batch into microbatches of that many sequences)"));
  }
  return batch / size;
}

// The vocabulary size when the recipe fixes it before training (a tokenizer file, the byte
// tokenizer); nullopt for one learned from the data (CheckTrainingData learns it).
absl::StatusOr<std::optional<int64_t>> KnownVocabulary(const Recipe& recipe, const JobPlan& plan) {
  const TrainingDataOptions& data = plan.data;
  if (data.tokenizer_path.empty() && data.pretokenized) {
    return recipe.section("model").Error(
        "tokenizer_path",
        "data.format = \"tokens\" needs the tokenizer the shards were made "
        "with (model.tokenizer_path)");
  }
  if (data.tokenizer_path.empty()) return std::nullopt;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(data.tokenizer_path);
  if (!tokenizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(WhereSet(recipe, "model", "tokenizer_path"),
                     ": model.tokenizer_path: ", tokenizer.status().message()));
  }
  return (*tokenizer)->vocab_size();
}

// On the CPU, where the machine's memory is the device's: the model's f32 parameters and their
// gradients (8 bytes a parameter, before any optimizer state) split over every rank that could
// hold a share of them (dp_shard x cp x tp x pp): a lower bound of one rank's, against memory.
absl::Status CheckModelStateFits(const JobPlan& plan, const LlamaConfig& config, int64_t memory) {
  if (plan.job.device_name != "cpu") return absl::OkStatus();
  const MeshShape& shape = plan.parallelism.shape;
  const int64_t sharers = int64_t{shape.degree(MeshDim::kDpShard)} * shape.degree(MeshDim::kCp) *
                          shape.degree(MeshDim::kTp) * shape.degree(MeshDim::kPp);
  const double bytes = static_cast<double>(config.ParameterCount()) * 8 / sharers;
  if (bytes <= static_cast<double>(memory)) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "model.flavor = \"", plan.model.flavor, "\" has ", config.ParameterCount(),
      " parameters: with their gradients in f32 that is at least ", static_cast<int64_t>(bytes),
      " bytes on each of ", sharers,
      " rank(s) that share them (dp_shard x cp x tp x pp), more than the limit of ", memory,
      " bytes of this machine's memory: shard the model over more ranks or choose a smaller "
      "flavor"));
}

// The model's shapes (`config`, its vocabulary only where `vocab_known`) against the tp degree.
absl::Status CheckTensorParallelShapes(const Recipe& recipe, const JobPlan& plan,
                                       const LlamaConfig& config, bool vocab_known) {
  const int tp = plan.parallelism.shape.degree(MeshDim::kTp);
  absl::Status divides = CheckTensorParallelDegree(config, tp, vocab_known);
  if (divides.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(KeyValue(recipe, "parallelism", "tensor_parallel_degree", tp),
                   " with model.flavor = \"", plan.model.flavor, "\"",
                   vocab_known ? absl::StrCat(" and a vocabulary of ", config.vocab_size) : "",
                   ": ", divides.message()));
}

// The model's shapes against the tp degree, and one microbatch's logits (batch x seq_len x this
// rank's vocabulary columns, f32: the largest activation) and the model's state against memory.
absl::Status CheckModel(const Recipe& recipe, const PlanOptions& options, JobPlan& plan) {
  LlamaConfig config = plan.model.config;
  const int tp = plan.parallelism.shape.degree(MeshDim::kTp);
  TITAN_ASSIGN_OR_RETURN(std::optional<int64_t> vocab, KnownVocabulary(recipe, plan));
  if (vocab) config.vocab_size = *vocab;
  TITAN_RETURN_IF_ERROR(CheckTensorParallelShapes(recipe, plan, config, vocab.has_value()));
  const int64_t batch = plan.training.local_batch_size, seq_len = plan.training.seq_len;
  if (!vocab) {
    vocab = plan.data.tokenizer_path.empty() ? plan.data.bpe_vocab_size + 256 : config.vocab_size;
  }
  const int64_t memory = options.memory_bytes > 0 ? options.memory_bytes : PhysicalMemoryBytes();
  std::optional<int64_t> tokens = Product(batch, seq_len);
  std::optional<int64_t> bytes =
      tokens ? Product(*tokens, (*vocab + tp - 1) / tp * int64_t{4}) : std::nullopt;
  if (!bytes || *bytes > memory) {
    return absl::ResourceExhaustedError(absl::StrCat(
        KeyValue(recipe, "training", "local_batch_size", batch), " x training.seq_len = ", seq_len,
        " tokens: the logits of one microbatch (tokens x ", *vocab, " vocabulary / ", tp,
        " tensor-parallel rank(s) x 4 bytes) ",
        bytes ? absl::StrCat("take ", *bytes, " bytes, more than the limit of ", memory,
                             " bytes of this machine's memory")
              : absl::StrCat("overflow int64 (the most is ", kInt64Max, ")"),
        ": lower local_batch_size or seq_len"));
  }
  return CheckModelStateFits(plan, config, memory);
}

// A mixture of experts computes its weights' gradients with its inputs' (MoeFeedForward): the
// schedules that split the backward into input and weight passes are refused before any rank
// starts (a CSV schedule with I and W actions is refused at its first I action).
absl::Status CheckExpertsSchedule(const Recipe& recipe, const JobPlan& plan) {
  if (!plan.model.config.moe.enabled() || plan.parallelism.pipeline() == nullptr) {
    return absl::OkStatus();
  }
  const ConfigView& parallelism = recipe.section("parallelism");
  absl::StatusOr<std::string> csv = parallelism.GetString("pipeline_parallel_schedule_csv");
  absl::StatusOr<std::string> schedule = parallelism.GetString("pipeline_parallel_schedule");
  if (!csv.ok() || !csv->empty() || !schedule.ok()) return absl::OkStatus();
  for (const char* split : {"InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"}) {
    if (*schedule != split) continue;
    return absl::UnimplementedError(
        absl::StrCat(WhereSet(recipe, "parallelism", "pipeline_parallel_schedule"),
                     ": parallelism.pipeline_parallel_schedule = \"", *schedule,
                     "\" splits the backward into input and weight passes, which a mixture of "
                     "experts (model.flavor"
                     " = \"",
                     plan.model.flavor,
                     "\") does not yet; use 1F1B, GPipe, Interleaved1F1B or "
                     "LoopedBFS"));
  }
  return absl::OkStatus();
}

// TorchTitan's debug.moe_force_load_balance (MoeConfig::force_balance) and the sequence-wise
// auxiliary loss (MoeConfig::aux_loss_alpha), for a model with routed experts.
// model.n_layers: the flavor's shape with another depth (a model of a large flavor's width that
// fits fewer devices, for measurements).
absl::Status ApplyLayerCount(const Recipe& recipe, JobPlan& plan) {
  TITAN_ASSIGN_OR_RETURN(const int64_t layers, recipe.section("model").GetInt("n_layers"));
  if (layers == 0) return absl::OkStatus();
  LlamaConfig& config = plan.model.config;
  if (config.moe.enabled() && layers <= config.moe.dense_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat(WhereSet(recipe, "model", "n_layers"), ": model.n_layers = ", layers,
                     " leaves no layer with experts: model.flavor = \"", plan.model.flavor,
                     "\" keeps its first ", config.moe.dense_layers, " layer(s) dense"));
  }
  config.n_layers = layers;
  return absl::OkStatus();
}

absl::Status ApplyMoeOptions(const Recipe& recipe, JobPlan& plan) {
  TITAN_ASSIGN_OR_RETURN(const bool force,
                         recipe.section("debug").GetBool("moe_force_load_balance"));
  TITAN_ASSIGN_OR_RETURN(const double alpha,
                         recipe.section("model").GetFloat("moe_aux_loss_alpha"));
  if (plan.model.config.moe.enabled()) {
    plan.model.config.moe.force_balance = force;
    plan.model.config.moe.aux_loss_alpha = alpha;
    return absl::OkStatus();
  }
  const std::string dense =
      absl::StrCat(": model.flavor = \"", plan.model.flavor, "\" has no routed experts to balance");
  if (force) {
    return absl::InvalidArgumentError(
        absl::StrCat(WhereSet(recipe, "debug", "moe_force_load_balance"),
                     ": debug.moe_force_load_balance = true", dense));
  }
  if (alpha > 0) {
    return absl::InvalidArgumentError(absl::StrCat(WhereSet(recipe, "model", "moe_aux_loss_alpha"),
                                                   ": model.moe_aux_loss_alpha = ", alpha, dense));
  }
  return absl::OkStatus();
}

// Expert parallelism splits the routed experts over ranks borrowed from dp_shard x cp, whose
// fsdp then shards and averages their gradients: it needs experts that divide and fsdp.
absl::Status CheckExpertParallel(const Recipe& recipe, const JobPlan& plan) {
  const MeshShape& shape = plan.parallelism.shape;
  const int ep = shape.degree(MeshDim::kEp);
  if (ep == 1) return absl::OkStatus();
  const std::string where =
      KeyValue(recipe, "parallelism", "expert_parallel_degree", static_cast<int64_t>(ep));
  const MoeConfig& moe = plan.model.config.moe;
  if (!moe.enabled()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": model.flavor = \"", plan.model.flavor,
                                                   "\" has no routed experts to split"));
  }
  if (moe.experts % ep != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, " does not divide the ", moe.experts,
                                                   " routed experts of model.flavor = \"",
                                                   plan.model.flavor, "\""));
  }
  if (shape.degree(MeshDim::kDpShard) == 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     " needs fsdp (parallelism.data_parallel_shard_degree > 1), which shards the "
                     "experts over the ranks holding the same ones and averages their gradients"));
  }
  return absl::OkStatus();
}

// What the run refuses once it has read the data, read as the first data-parallel rank reads
// it (a vocabulary learned from it is not written): the records and the tokenizer, the global
// batch against the data's windows, then the vocabulary against the tp degree and against the
// checkpoint the run starts from.
absl::Status CheckTrainingData(const Recipe& recipe, const JobPlan& plan) {
  TrainingDataOptions options = plan.data;
  options.write_vocabulary = false;
  TITAN_ASSIGN_OR_RETURN(TrainingData data,
                         LoadCheckedTrainingData(options, plan, JobDataParallelRank(plan, 0)));
  LlamaConfig config = plan.model.config;
  config.vocab_size = data.tokenizer->vocab_size();
  TITAN_RETURN_IF_ERROR(CheckTensorParallelShapes(recipe, plan, config, true));
  return Checkpointer::CheckStartingModel(plan.checkpoint, config, plan.model.flavor);
}

absl::Status CheckFolders(const Recipe& recipe, const JobPlan& plan) {
  if (plan.job.dump_folder.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        WhereSet(recipe, "job", "dump_folder"),
        ": job.dump_folder: expected a folder for the run's logs, metrics and checkpoints, found "
        "an empty path (write \".\" to mean the working directory)"));
  }
  const std::string& data = plan.data.dataset_path;
  std::error_code error;
  if (!std::filesystem::exists(data, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(WhereSet(recipe, "training", "dataset_path"), ": training.dataset_path: ",
                     data.empty() ? "is empty: name a text, .jsonl or .jsonl.zst file or folder"
                                  : absl::StrCat("\"", data, "\": no such file or folder")));
  }
  return absl::OkStatus();
}

void CheckFloat8(const Recipe& recipe, const PlanOptions& options, JobPlan& plan,
                 std::vector<std::string>& problems) {
  const Float8Settings& float8 = plan.float8;
  const ConfigView& section = recipe.section("float8");
  // Where each key was set; a default's is the recipe file, never the word "default".
  const std::string where = WhereSet(recipe, "float8", "enable_fsdp_float8_all_gather");
  const std::string precompute_where =
      WhereSet(recipe, "float8", "precompute_float8_dynamic_scale_for_fsdp");
  if (float8.plugin == nullptr) {
    const std::pair<const char*, bool> keys[] = {
        {"enable_fsdp_float8_all_gather", float8.gather_in_float8},
        {"precompute_float8_dynamic_scale_for_fsdp", float8.precompute_scales}};
    for (const auto& [key, on] : keys) {
      if (!on) continue;
      plan.warnings.push_back(absl::StrCat(
          section.Where(key), ": float8.", key,
          " = true has no effect: model.converters does not include \"float8\", so no layer "
          "runs in Float8"));
    }
    return;
  }
  auto check = [&problems](const absl::Status& status) {
    if (!status.ok()) problems.emplace_back(status.message());
  };
  const int dp_shard = plan.parallelism.shape.degree(MeshDim::kDpShard);
  if (float8.gather_in_float8 && !options.launched_world &&
      plan.parallelism.shard_degree_setting == -1 && dp_shard == 1) {
    // -1 takes the ranks the other degrees leave: the launched world decides.
    plan.unchecked.push_back(absl::StrCat(
        where,
        ": float8.enable_fsdp_float8_all_gather needs fsdp, and data_parallel_shard_degree = "
        "-1 leaves it 1 rank of ",
        plan.parallelism.shape.world_size(), "; the run refuses it unless launched on more ranks"));
    check(CheckFloat8AllGather(float8.gather_in_float8, float8.precompute_scales, 2, where,
                               precompute_where));
  } else {
    check(CheckFloat8AllGather(float8.gather_in_float8, float8.precompute_scales, dp_shard, where,
                               precompute_where));
  }
  if (float8.gather_in_float8 && float8.recipe_name != "tensorwise") {
    problems.push_back(absl::StrCat(
        where,
        ": float8.enable_fsdp_float8_all_gather = true gathers each weight with one e4m3 "
        "scale, which only the tensorwise recipe uses, not float8.recipe_name = \"",
        float8.recipe_name, "\""));
  }
}

}  // namespace

absl::Status PlanAndCheck(const Recipe& recipe, const PluginRegistry& registry,
                          const PlanOptions& options, JobPlan& plan,
                          std::vector<std::string>& problems) {
  auto check = [&problems](const absl::Status& status) {
    if (!status.ok()) problems.emplace_back(status.message());
  };
  ParallelismPlan& parallel = plan.parallelism;
  const MeshShape& shape = parallel.shape;
  parallel.data_parallel_degree =
      shape.degree(MeshDim::kDpReplicate) * shape.degree(MeshDim::kDpShard);
  check(CheckFolders(recipe, plan));
  TITAN_ASSIGN_OR_RETURN(plan.model.config, plan.model.family->Flavor(plan.model.flavor));
  check(ApplyLayerCount(recipe, plan));
  check(ApplyMoeOptions(recipe, plan));

  absl::StatusOr<int64_t> accumulation = GradientAccumulation(recipe, plan);
  check(accumulation.status());
  if (accumulation.ok()) {
    parallel.accumulation = *accumulation;
    if (!Product(plan.validation.steps, *accumulation)) {
      // A validation step covers a global batch: validation.steps x the accumulation microbatches.
      problems.push_back(absl::StrCat(
          KeyValue(recipe, "validation", "steps", plan.validation.steps), " x ", *accumulation,
          " microbatches per global batch overflow int64 (the most is ", kInt64Max, ")"));
    }
  }
  CreateParallelPlugins(recipe, registry, plan, problems);
  if (plan.comm.plugin == nullptr && shape.world_size() > 1) {
    check(ChooseAutoComm(registry, recipe.section("comm"), plan.comm));
  }
  // After the comm plugin is known: pp checks its schedule against the comm's point-to-point order.
  absl::StatusOr<int64_t> microbatches = PipelineMicrobatches(recipe, plan);
  check(microbatches.status());
  if (microbatches.ok()) {
    parallel.pipeline_microbatches = *microbatches;
    check(CheckPipelinePlan(plan));
  }
  check(CheckModel(recipe, options, plan));
  check(CheckExpertsSchedule(recipe, plan));
  check(CheckExpertParallel(recipe, plan));
  check(CheckControlPlane(plan.control_plane, shape.world_size()));
  CheckComm(recipe, plan, problems);
  CheckFloat8(recipe, options, plan, problems);
  check(CheckModelOnlyFormat(plan));
  // Last, and only for a recipe with no other problem: reading the data takes a while. Its
  // error is the run's, exit status included (a damaged shard is data lost, not a usage error).
  if (options.read_data && problems.empty()) {
    TITAN_RETURN_IF_ERROR(CheckTrainingData(recipe, plan));
  }
  const TrainingSettings& training = plan.training;
  if (training.warmup_steps > training.steps) {
    plan.warnings.push_back(absl::StrCat(
        KeyValue(recipe, "lr_scheduler", "warmup_steps", training.warmup_steps),
        " is more than training.steps = ", training.steps, ": the warmup is cut to ",
        training.steps,
        " steps, so the learning rate reaches optimizer.lr only at the last step and never "
        "decays"));
  }
  return absl::OkStatus();
}

absl::Status CheckFloat8AllGather(bool gather_float8, bool precompute, int dp_shard,
                                  absl::string_view gather_where,
                                  absl::string_view precompute_where) {
  if (precompute && !gather_float8) {
    return absl::InvalidArgumentError(
        absl::StrCat(precompute_where,
                     ": float8.precompute_float8_dynamic_scale_for_fsdp = true needs "
                     "float8.enable_fsdp_float8_all_gather = true: it computes the scales of the "
                     "weights fsdp gathers in float8"));
  }
  if (gather_float8 && dp_shard <= 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        gather_where,
        ": float8.enable_fsdp_float8_all_gather = true gathers weights under fsdp, which "
        "this run does not shard (parallelism.data_parallel_shard_degree = ",
        dp_shard, "); set it to false or shard over more ranks"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainingData> LoadCheckedTrainingData(const TrainingDataOptions& data,
                                                     const JobPlan& plan, int dp_rank) {
  TITAN_ASSIGN_OR_RETURN(TrainingData loaded,
                         LoadTrainingData(data, dp_rank, JobDataParallelDegree(plan)));
  TITAN_RETURN_IF_ERROR(CheckGlobalBatchFitsData(
      plan.training.global_batch_size, plan.training.seq_len, loaded.train.num_windows()));
  return loaded;
}

absl::Status CheckGlobalBatchFitsData(int64_t global_batch, int64_t seq_len,
                                      int64_t training_windows) {
  if (global_batch <= training_windows) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "training.global_batch_size = ", global_batch, " sequences is more than the limit of ",
      training_windows, " training window(s) of seq_len + 1 = ", seq_len + 1,
      " tokens the data holds: one optimizer step would repeat sequences; lower "
      "global_batch_size or seq_len, or give more data"));
}

}  // namespace titan
