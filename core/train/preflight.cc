#include "core/train/preflight.h"

#include <unistd.h>

#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/data/tokenizer.h"
#include "core/model/activation_checkpoint.h"
#include "core/model/config.h"
#include "core/runtime/control_plane/control_plane.h"

namespace titan {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// a x b, or nullopt where it overflows int64.
std::optional<int64_t> Product(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

// Where a key's value was set; for a default, the recipe file.
std::string Where(const Recipe& recipe, const std::string& section, const std::string& key) {
  const std::string where = recipe.section(section).Where(key);
  return where == "default" ? absl::StrCat(recipe.source(), ": (default value)") : where;
}

std::string KeyValue(const Recipe& recipe, const std::string& section, const std::string& key,
                     int64_t value) {
  return absl::StrCat(Where(recipe, section, key), ": ", section, ".", key, " = ", value);
}

absl::StatusOr<std::unique_ptr<ParallelPlugin>> CreateParallelPlugin(const Recipe& recipe,
                                                                     const PluginRegistry& registry,
                                                                     const char* name) {
  absl::StatusOr<std::unique_ptr<ParallelPlugin>> plugin =
      registry.CreateConfigured<ParallelPlugin>(name, recipe.section("parallelism"));
  if (!plugin.ok()) {
    return absl::Status(
        plugin.status().code(),
        absl::StrCat("the mesh needs the ", name, " parallel plugin: ", plugin.status().message()));
  }
  return std::move(*plugin);
}

// The tp plugin when the tp degree is above 1; sequence parallel splits every sequence among the
// tp ranks, so seq_len must divide.
absl::StatusOr<std::unique_ptr<ParallelPlugin>> TensorParallelPlugin(const Recipe& recipe,
                                                                     const PluginRegistry& registry,
                                                                     const MeshShape& shape) {
  const int tp = shape.degree(MeshDim::kTp);
  if (tp == 1) return nullptr;
  TITAN_ASSIGN_OR_RETURN(int64_t seq_len, recipe.section("training").GetInt("seq_len"));
  if (seq_len % tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "training.seq_len = ", seq_len,
        " is not divisible by parallelism.tensor_parallel_degree = ", tp,
        " (sequence parallel gives each tensor-parallel rank seq_len / ", tp, " tokens)"));
  }
  return CreateParallelPlugin(recipe, registry, "tp");
}

// TorchTitan's choice of data-parallel plugin: fsdp whenever dp_shard > 1 (HSDP when
// dp_replicate > 1 too), ddp for dp_replicate alone, none on one data-parallel rank.
absl::StatusOr<std::unique_ptr<ParallelPlugin>> DataParallelPlugin(const Recipe& recipe,
                                                                   const PluginRegistry& registry,
                                                                   const MeshShape& shape) {
  const char* name = shape.degree(MeshDim::kDpShard) > 1       ? "fsdp"
                     : shape.degree(MeshDim::kDpReplicate) > 1 ? "ddp"
                                                               : nullptr;
  if (name == nullptr) return nullptr;
  return CreateParallelPlugin(recipe, registry, name);
}

int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? Product(pages, page).value_or(kInt64Max) : kInt64Max;
}

// The vocabulary size when the recipe fixes it before training (a tokenizer file, the byte
// tokenizer); nullopt for one learned from the data, with a note of why in `report`.
absl::StatusOr<std::optional<int64_t>> KnownVocabulary(const Recipe& recipe,
                                                       const PreflightOptions& options, int tp,
                                                       PreflightReport& report) {
  const ConfigView& model = recipe.section("model");
  TITAN_ASSIGN_OR_RETURN(std::string path, model.GetString("tokenizer_path"));
  TITAN_ASSIGN_OR_RETURN(std::string format, recipe.section("data").GetString("format"));
  if (path.empty() && format == "tokens") {
    return model.Error("tokenizer_path",
                       "data.format = \"tokens\" needs the tokenizer the shards were made "
                       "with (model.tokenizer_path)");
  }
  if (path.empty()) {
    TITAN_ASSIGN_OR_RETURN(int64_t bpe, recipe.section("data").GetInt("bpe_vocab_size"));
    if (tp > 1) {
      report.unchecked.push_back(absl::StrCat(
          "model.tokenizer_path is empty, so the vocabulary (at most data.bpe_vocab_size = ", bpe,
          " + 256 special tokens) is learned from the data at start-up; its divisibility by the "
          "tensor-parallel degree is checked then"));
    }
    return std::nullopt;
  }
  if (path != "byte" && !options.check_files) return std::nullopt;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(path);
  if (!tokenizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(recipe, "model", "tokenizer_path"),
                     ": model.tokenizer_path: ", tokenizer.status().message()));
  }
  return (*tokenizer)->vocab_size();
}

// The model's shapes against the tp degree, and one microbatch's logits (batch x seq_len x this
// rank's vocabulary columns, f32: the largest activation) against memory.
absl::Status CheckModel(const Recipe& recipe, const MeshShape& shape,
                        const PreflightOptions& options, PreflightReport& report) {
  TITAN_ASSIGN_OR_RETURN(std::string flavor, recipe.section("model").GetString("flavor"));
  TITAN_ASSIGN_OR_RETURN(LlamaConfig config, LlamaFlavor(flavor));
  const int tp = shape.degree(MeshDim::kTp);
  TITAN_ASSIGN_OR_RETURN(std::optional<int64_t> vocab,
                         KnownVocabulary(recipe, options, tp, report));
  if (vocab) config.vocab_size = *vocab;
  absl::Status divides = CheckTensorParallelDegree(config, tp, vocab.has_value());
  if (!divides.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        KeyValue(recipe, "parallelism", "tensor_parallel_degree", tp), " with model.flavor = \"",
        flavor, "\"", vocab ? absl::StrCat(" and a vocabulary of ", *vocab) : "", ": ",
        divides.message()));
  }
  const ConfigView& training = recipe.section("training");
  TITAN_ASSIGN_OR_RETURN(int64_t batch, training.GetInt("local_batch_size"));
  TITAN_ASSIGN_OR_RETURN(int64_t seq_len, training.GetInt("seq_len"));
  if (!vocab) {
    TITAN_ASSIGN_OR_RETURN(int64_t bpe, recipe.section("data").GetInt("bpe_vocab_size"));
    vocab = recipe.section("model").GetString("tokenizer_path")->empty() ? bpe + 256
                                                                         : config.vocab_size;
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
  return absl::OkStatus();
}

absl::Status CheckFolders(const Recipe& recipe, const PreflightOptions& options) {
  TITAN_ASSIGN_OR_RETURN(std::string dump, recipe.section("job").GetString("dump_folder"));
  if (dump.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(recipe, "job", "dump_folder"),
        ": job.dump_folder: expected a folder for the run's logs, metrics and checkpoints, found "
        "an empty path (write \".\" to mean the working directory)"));
  }
  TITAN_ASSIGN_OR_RETURN(std::string data, recipe.section("training").GetString("dataset_path"));
  std::error_code error;
  if (options.check_files && !std::filesystem::exists(data, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(recipe, "training", "dataset_path"), ": training.dataset_path: ",
                     data.empty() ? "is empty: name a text, .jsonl or .jsonl.zst file or folder"
                                  : absl::StrCat("\"", data, "\": no such file or folder")));
  }
  return absl::OkStatus();
}

// Whether model.converters turns Float8 on (the recipe then selects a float8 plugin).
bool UsesFloat8(const Recipe& recipe) {
  for (const Recipe::SelectedPlugin& plugin : recipe.plugins()) {
    if (plugin.section == "float8") return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<ParallelPlugins> CreateParallelPlugins(const Recipe& recipe,
                                                      const PluginRegistry& registry,
                                                      const MeshShape& shape) {
  ParallelPlugins plugins;
  if (shape.degree(MeshDim::kPp) > 1) {
    TITAN_ASSIGN_OR_RETURN(plugins.pipeline, CreateParallelPlugin(recipe, registry, "pp"));
  }
  if (shape.degree(MeshDim::kCp) > 1) {
    TITAN_ASSIGN_OR_RETURN(int64_t seq_len, recipe.section("training").GetInt("seq_len"));
    const int64_t chunks = 2 * int64_t{shape.degree(MeshDim::kCp)};
    if (seq_len % chunks != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("training.seq_len = ", seq_len, " is not divisible by ", chunks,
                       " = 2 x parallelism.context_parallel_degree (", chunks / 2,
                       "): each cp rank holds two mirrored chunks of every sequence"));
    }
    TITAN_ASSIGN_OR_RETURN(plugins.context_parallel, CreateParallelPlugin(recipe, registry, "cp"));
  }
  TITAN_ASSIGN_OR_RETURN(plugins.data_parallel, DataParallelPlugin(recipe, registry, shape));
  TITAN_ASSIGN_OR_RETURN(plugins.tensor_parallel, TensorParallelPlugin(recipe, registry, shape));
  return plugins;
}

absl::StatusOr<int64_t> PipelineMicrobatches(const Recipe& recipe, const MeshShape& shape) {
  if (shape.degree(MeshDim::kPp) == 1) return 1;
  TITAN_ASSIGN_OR_RETURN(int64_t batch, recipe.section("training").GetInt("local_batch_size"));
  TITAN_ASSIGN_OR_RETURN(int64_t size,
                         recipe.section("parallelism").GetInt("pipeline_parallel_microbatch_size"));
  if (batch % size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        KeyValue(recipe, "training", "local_batch_size", batch), " is not a multiple of ",
        KeyValue(recipe, "parallelism", "pipeline_parallel_microbatch_size", size),
        " (the pipeline splits each local batch into microbatches of that many sequences)"));
  }
  return batch / size;
}

absl::StatusOr<int64_t> GradientAccumulation(const Recipe& recipe, const MeshShape& shape) {
  const ConfigView& training = recipe.section("training");
  TITAN_ASSIGN_OR_RETURN(int64_t batch, training.GetInt("local_batch_size"));
  TITAN_ASSIGN_OR_RETURN(int64_t global_batch, training.GetInt("global_batch_size"));
  TITAN_ASSIGN_OR_RETURN(int64_t seq_len, training.GetInt("seq_len"));
  TITAN_ASSIGN_OR_RETURN(int64_t steps, training.GetInt("steps"));
  const int64_t dp_degree =
      int64_t{shape.degree(MeshDim::kDpReplicate)} * shape.degree(MeshDim::kDpShard);
  std::optional<int64_t> per_microbatch = Product(batch, dp_degree);
  if (!per_microbatch) {
    return absl::OutOfRangeError(
        absl::StrCat(KeyValue(recipe, "training", "local_batch_size", batch), " x ", dp_degree,
                     " data-parallel ranks overflows int64 (the most is ", kInt64Max, ")"));
  }
  if (global_batch < 0) global_batch = *per_microbatch;
  if (global_batch % *per_microbatch != 0) {
    return absl::InvalidArgumentError(absl::StrCat("training.global_batch_size = ", global_batch,
                                                   " is not a multiple of local_batch_size ", batch,
                                                   " x ", dp_degree, " data-parallel rank(s)"));
  }
  std::optional<int64_t> step_tokens = Product(global_batch, seq_len);
  std::optional<int64_t> run_tokens = step_tokens ? Product(*step_tokens, steps) : std::nullopt;
  if (!run_tokens) {
    return absl::OutOfRangeError(absl::StrCat(
        KeyValue(recipe, "training", "global_batch_size", global_batch), " x seq_len ", seq_len,
        step_tokens ? absl::StrCat(" x steps ", steps) : "", " tokens overflow int64 (the most is ",
        kInt64Max, "): the run's token count is an int64"));
  }
  return global_batch / *per_microbatch;
}

absl::Status CheckFloat8AllGather(bool gather_float8, bool precompute, int dp_shard,
                                  absl::string_view where) {
  if (precompute && !gather_float8) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": float8.precompute_float8_dynamic_scale_for_fsdp = true needs "
                     "float8.enable_fsdp_float8_all_gather = true: it computes the scales of the "
                     "weights fsdp gathers in float8"));
  }
  if (gather_float8 && dp_shard <= 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        ": float8.enable_fsdp_float8_all_gather = true gathers weights under fsdp, which "
        "this run does not shard (parallelism.data_parallel_shard_degree = ",
        dp_shard, "); set it to false or shard over more ranks"));
  }
  return absl::OkStatus();
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

absl::StatusOr<PreflightReport> CheckBeforeTraining(const Recipe& recipe,
                                                    const PluginRegistry& registry,
                                                    const MeshShape& shape,
                                                    const PreflightOptions& options) {
  PreflightReport report;
  std::vector<std::string> problems;
  auto check = [&problems](const absl::Status& status) {
    if (!status.ok()) problems.emplace_back(status.message());
  };
  check(CheckFolders(recipe, options));
  absl::StatusOr<int64_t> accumulation = GradientAccumulation(recipe, shape);
  check(accumulation.status());
  TITAN_ASSIGN_OR_RETURN(int64_t eval_steps, recipe.section("validation").GetInt("steps"));
  if (accumulation.ok() && !Product(eval_steps, *accumulation)) {
    // A validation step covers a global batch: validation.steps x the accumulation microbatches.
    problems.push_back(absl::StrCat(
        KeyValue(recipe, "validation", "steps", eval_steps), " x ", *accumulation,
        " microbatches per global batch overflow int64 (the most is ", kInt64Max, ")"));
  }
  check(CreateParallelPlugins(recipe, registry, shape).status());
  check(PipelineMicrobatches(recipe, shape).status());
  check(CheckModel(recipe, shape, options, report));
  check(CheckControlPlane(recipe, shape.world_size()));
  if (!UsesFloat8(recipe)) {
    const ConfigView& float8 = recipe.section("float8");
    for (const char* key :
         {"enable_fsdp_float8_all_gather", "precompute_float8_dynamic_scale_for_fsdp"}) {
      TITAN_ASSIGN_OR_RETURN(bool on, float8.GetBool(key));
      if (on) {
        report.warnings.push_back(absl::StrCat(
            float8.Where(key), ": float8.", key,
            " = true has no effect: model.converters does not include \"float8\", so no layer "
            "runs in Float8"));
      }
    }
  } else {
    const ConfigView& float8 = recipe.section("float8");
    TITAN_ASSIGN_OR_RETURN(bool gather, float8.GetBool("enable_fsdp_float8_all_gather"));
    TITAN_ASSIGN_OR_RETURN(bool precompute,
                           float8.GetBool("precompute_float8_dynamic_scale_for_fsdp"));
    TITAN_ASSIGN_OR_RETURN(std::string name, float8.GetString("recipe_name"));
    TITAN_ASSIGN_OR_RETURN(int64_t shard_setting,
                           recipe.section("parallelism").GetInt("data_parallel_shard_degree"));
    const int dp_shard = shape.degree(MeshDim::kDpShard);
    if (gather && shard_setting == -1 && dp_shard == 1) {
      // -1 takes the ranks the other degrees leave: the launched world decides.
      report.unchecked.push_back(absl::StrCat(
          float8.Where("enable_fsdp_float8_all_gather"),
          ": float8.enable_fsdp_float8_all_gather needs fsdp, and data_parallel_shard_degree = "
          "-1 leaves it 1 rank of ",
          shape.world_size(), "; the run refuses it unless launched on more ranks"));
      check(CheckFloat8AllGather(gather, precompute, 2,
                                 float8.Where("enable_fsdp_float8_all_gather")));
    } else {
      check(CheckFloat8AllGather(gather, precompute, dp_shard,
                                 float8.Where("enable_fsdp_float8_all_gather")));
    }
    if (gather && name != "tensorwise") {
      problems.push_back(absl::StrCat(
          float8.Where("enable_fsdp_float8_all_gather"),
          ": float8.enable_fsdp_float8_all_gather = true gathers each weight with one e4m3 "
          "scale, which only the tensorwise recipe uses, not float8.recipe_name = \"",
          name, "\""));
    }
  }

  const ConfigView& ac = recipe.section("activation_checkpoint");
  TITAN_ASSIGN_OR_RETURN(std::string ac_mode, ac.GetString("mode"));
  TITAN_ASSIGN_OR_RETURN(std::string ac_option, ac.GetString("selective_ac_option"));
  absl::StatusOr<ActivationCheckpoint> parsed = ParseActivationCheckpoint(ac_mode, ac_option);
  if (!parsed.ok()) {
    problems.push_back(absl::StrCat(Where(recipe, "activation_checkpoint", "selective_ac_option"),
                                    ": ", parsed.status().message()));
  } else if (ac_mode != "selective" && ac.Where("selective_ac_option") != "default") {
    report.warnings.push_back(absl::StrCat(
        ac.Where("selective_ac_option"), ": activation_checkpoint.selective_ac_option = \"",
        ac_option, "\" has no effect with activation_checkpoint.mode = \"", ac_mode, "\""));
  }

  const ConfigView& lr = recipe.section("lr_scheduler");
  TITAN_ASSIGN_OR_RETURN(int64_t warmup, lr.GetInt("warmup_steps"));
  TITAN_ASSIGN_OR_RETURN(int64_t steps, recipe.section("training").GetInt("steps"));
  if (warmup > steps) {
    report.warnings.push_back(absl::StrCat(
        KeyValue(recipe, "lr_scheduler", "warmup_steps", warmup),
        " is more than training.steps = ", steps, ": the warmup is cut to ", steps,
        " steps, so the learning rate reaches optimizer.lr only at the last step and never "
        "decays"));
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        problems.size() == 1 ? "" : absl::StrCat(problems.size(), " problems in the recipe:\n"),
        absl::StrJoin(problems, "\n")));
  }
  return report;
}

}  // namespace titan
