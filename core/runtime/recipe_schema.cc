#include "core/runtime/recipe_schema.h"

#include <algorithm>
#include <limits>

namespace titan {
namespace {

constexpr double kNoLimit = std::numeric_limits<double>::infinity();
// More ranks than any job has; it keeps products of degrees far from overflow.
constexpr double kMaxRanks = 1 << 20;
// Token ids are int32, and Llama 3's 256 special tokens follow the ordinary ones.
constexpr double kMaxOrdinaryTokens = std::numeric_limits<int32_t>::max() - 256.0;

ConfigKey Bool(std::string name, bool value, std::string help) {
  return {std::move(name), ConfigType::kBool, ConfigValue(value), std::move(help), {}, {}, {}};
}
ConfigKey Int(std::string name, int64_t value, double min, double max, std::string help) {
  ConfigKey key{std::move(name), ConfigType::kInt, ConfigValue(value), std::move(help), {}, {}, {}};
  if (min > -kNoLimit) key.min = min;
  if (max < kNoLimit) key.max = max;
  return key;
}
ConfigKey Float(std::string name, double value, double min, double max, std::string help) {
  ConfigKey key{
      std::move(name), ConfigType::kFloat, ConfigValue(value), std::move(help), {}, {}, {}};
  if (min > -kNoLimit) key.min = min;
  if (max < kNoLimit) key.max = max;
  return key;
}
ConfigKey String(std::string name, std::string value, std::string help,
                 std::vector<std::string> choices = {}) {
  return {std::move(name),
          ConfigType::kString,
          ConfigValue(std::move(value)),
          std::move(help),
          {},
          {},
          std::move(choices)};
}
ConfigKey StringList(std::string name, std::vector<std::string> value, std::string help,
                     std::vector<std::string> choices = {}) {
  return {std::move(name),
          ConfigType::kStringList,
          ConfigValue(std::move(value)),
          std::move(help),
          {},
          {},
          std::move(choices)};
}

SectionSchema Section(std::string name, std::string help, std::vector<ConfigKey> keys) {
  SectionSchema section;
  section.name = std::move(name);
  section.help = std::move(help);
  section.keys = std::move(keys);
  return section;
}

using SectionMap = std::map<std::string, ConfigView, std::less<>>;

SectionSchema PluginSection(std::string name, std::string help, std::vector<ConfigKey> keys,
                            std::string kind, std::string selector,
                            std::function<bool(const SectionMap&)> in_use) {
  SectionSchema section = Section(std::move(name), std::move(help), std::move(keys));
  section.plugin_kind = std::move(kind);
  section.plugin_key = std::move(selector);
  section.plugin_in_use = std::move(in_use);
  return section;
}

bool BoolOf(const std::map<std::string, ConfigView, std::less<>>& sections,
            const std::string& section, const std::string& key) {
  auto value = sections.find(section)->second.GetBool(key);
  return value.ok() && *value;
}

std::vector<SectionSchema> MakeSchema() {
  std::vector<SectionSchema> schema;
  schema.push_back(PluginSection(
      "job", "the run as a whole",
      {String("dump_folder", "./outputs", "folder for logs, metrics and checkpoints"),
       String("description", "default job", "free text shown in the start-up log line"),
       String("device", "cpu", "device plugin to compute on: cpu (built in) or cuda")},
      "device", "device", [](const auto&) { return true; }));
  schema.push_back(Section(
      "model", "the model",
      {String("name", "llama3", "model family", {"llama3", "qwen3", "deepseek_v3"}),
       // Every family's flavors (core/model/model_family.h); the family refuses those it lacks.
       String("flavor", "debugmodel", "model size (the family's flavors)",
              {"debugmodel", "debugmodel_gqa", "debugmodel_tied", "debugmodel_moe",
               "debugmodel_plain_q", "0.6B", "1B", "1.7B", "3B", "4B", "8B", "14B", "16B", "32B",
               "70B", "405B", "671B", "30B-A3B", "235B-A22B"}),
       Int("n_layers", 0, 0, 1024,
           "blocks of the model; 0: the flavor's (another count keeps the flavor's width, e.g. "
           "an 8B of 8 layers that fits one GPU, for measurements)"),
       String("tokenizer_path", "", "tokenizer file; empty to learn a BPE vocabulary"),
       StringList("converters", {}, "module converters to apply", {"float8"}),
       Float("moe_aux_loss_alpha", 0.0, 0.0, kNoLimit,
             "a mixture of experts' sequence-wise auxiliary loss (DeepSeek-V3's) weight; 0: off; "
             "refused on a dense model")}));
  schema.push_back(
      PluginSection("optimizer", "the optimizer plugin and its settings",
                    {String("name", "adamw", "optimizer plugin: adamw, adam, sgd, ...")},
                    "optimizer", "name", [](const auto&) { return true; }));
  schema.push_back(Section(
      "lr_scheduler", "learning-rate schedule: linear warmup, stable phase, decay",
      {Int("warmup_steps", 200, 0, kNoLimit, "steps of linear warmup from 0 to optimizer.lr"),
       Float("decay_ratio", 1.0, 0.0, 1.0,
             "fraction of training.steps spent decaying at the end (warmup-stable-decay); "
             "capped to the steps after warmup, so 1.0 decays right after warmup"),
       String("decay_type", "linear", "shape of the decay",
              {"linear", "sqrt", "cosine", "constant"}),
       Float("min_lr_factor", 0.0, 0.0, 1.0, "final lr as a fraction of optimizer.lr")}));
  schema.push_back(Section(
      "training", "batch, sequence and steps",
      {Int("local_batch_size", 8, 1, kNoLimit, "sequences per rank per microbatch"),
       Int("global_batch_size", -1, -1, kNoLimit,
           "sequences per optimizer step across ranks; -1 = local_batch_size x data-parallel "
           "degree; larger values accumulate gradients"),
       Int("seq_len", 2048, 1, kNoLimit, "tokens per sequence"),
       Float("max_norm", 1.0, 0.0, kNoLimit, "clip gradients to this global L2 norm"),
       Int("steps", 10000, 1, kNoLimit, "optimizer steps to train"),
       String("dataset", "c4_test", "dataset name, shown in the start-up log line"),
       String("dataset_path", "", "file or folder holding the dataset"),
       String("mixed_precision_param", "float32",
              "dtype of matmul operands (activations and weights; f32 accumulation, f32 master "
              "weights and optimizer state): bfloat16 or float32",
              {"bfloat16", "float32"}),
       String("mixed_precision_reduce", "float32",
              "dtype of gradient reductions across ranks (float32 only)", {"float32"})}));
  schema.push_back(Section(
      "data", "how training.dataset_path is read and tokenized",
      {String("format", "text",
              "text: documents (plain text, .jsonl, .jsonl.zst) tokenized at start; tokens: "
              "pre-tokenized shards (*.tok, from titan-tokenize) made with "
              "model.tokenizer_path",
              {"text", "tokens"}),
       String("text_field", "text", "JSON Lines field holding a document's text"),
       String("text_separator", "",
              "a line that separates documents in text files (\"%\" in fortune files); empty: "
              "one file is one document"),
       String("on_bad_record", "error",
              "a malformed JSON line or record without text_field: stop with an error, or skip "
              "it and report the count",
              {"error", "skip"}),
       Int("bpe_vocab_size", 1792, 256, kMaxOrdinaryTokens,
           "ordinary tokens of the BPE vocabulary learned when model.tokenizer_path is empty "
           "(Llama 3's 256 special tokens come on top; token ids are int32)")}));
  schema.push_back(Section(
      "validation", "held-out loss during training",
      {Float("split", 0.05, 0.0, 0.5, "fraction of the packed windows held out for validation"),
       Int("freq", 0, 0, kNoLimit, "compute the validation loss every this many steps; 0: never"),
       Int("steps", 8, 1, kNoLimit, "global batches per validation")}));
  schema.push_back(Section(
      "parallelism",
      "degrees of the device mesh (pp, dp_replicate, dp_shard, cp, tp; ep borrows dp_shard x cp)",
      {Int("data_parallel_replicate_degree", 1, 1, kMaxRanks, "DDP / HSDP replicas"),
       Int("data_parallel_shard_degree", -1, -1, kMaxRanks,
           "FSDP shards; -1 takes the ranks the other degrees leave"),
       String("fsdp_reshard_after_forward", "default", "free gathered parameters after forward",
              {"default", "always", "never"}),
       Int("tensor_parallel_degree", 1, 1, kMaxRanks, "tensor (and sequence) parallel ranks"),
       Int("expert_parallel_degree", 1, 1, kMaxRanks,
           "ranks the routed experts are split over (the ep plugin), borrowed from dp_shard x cp: "
           "divides data_parallel_shard_degree x context_parallel_degree; needs fsdp"),
       Bool("enable_async_tensor_parallel", false,
            "overlap the sequence-parallel all-gather and reduce-scatter with the tp matmuls "
            "(rings of per-rank chunks; the log names any layer that stays synchronous)"),
       Bool(
           "disable_loss_parallel", false,
           "gather logits instead of a vocab-parallel loss (not implemented: refused with tp > 1)"),
       Int("pipeline_parallel_degree", 1, 1, kMaxRanks, "pipeline-parallel ranks (the pp plugin)"),
       String("pipeline_parallel_schedule", "1F1B", "pipeline schedule",
              {"GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble",
               "ZBVZeroBubble", "DualPipeV"}),
       String("pipeline_parallel_schedule_csv", "",
              "a CSV file of per-rank actions to run instead of a named schedule"),
       Int("pipeline_parallel_microbatch_size", 1, 1, kNoLimit,
           "sequences per pipeline microbatch (local_batch_size must be a multiple)"),
       Int("pipeline_parallel_layers_per_stage", -1, -1, kNoLimit,
           "blocks per stage, setting the number of stages; -1: 1 stage per rank (2 for "
           "multi-stage schedules)"),
       Int("pipeline_parallel_first_stage_less_layers", 1, 0, kNoLimit,
           "blocks of work the embedding counts for on the first stage"),
       Int("pipeline_parallel_last_stage_less_layers", 1, 0, kNoLimit,
           "blocks of work the output and loss count for on the last stage"),
       Int("context_parallel_degree", 1, 1, kMaxRanks, "ranks splitting each sequence"),
       String("context_parallel_rotate_method", "allgather",
              "how attention reaches the other cp ranks' keys and values: allgather, or "
              "alltoall (passed around the ring)",
              {"allgather", "alltoall"})}));
  schema.push_back(PluginSection(
      "checkpoint", "checkpoint saving and loading",
      {Bool("enable", false, "save and load checkpoints"),
       String("format", "dcp", "checkpoint plugin: dcp, safetensors, ..."),
       String("folder", "checkpoint", "folder under job.dump_folder"),
       Int("interval", 500, 1, kNoLimit, "save every this many steps"),
       String("async_mode", "disabled", "write checkpoints in the background",
              {"disabled", "async"}),
       Int("keep_latest_k", 10, 0, kNoLimit, "checkpoints to keep; 0 keeps all"),
       Int("load_step", -1, -1, kNoLimit, "step to resume from; -1 = the latest"),
       StringList("exclude_from_loading", {}, "state not to restore on load",
                  {"model", "optimizer", "lr_scheduler", "dataloader", "rng"}),
       String("initial_load_path", "", "checkpoint to start from when the folder has none"),
       Bool("last_save_model_only", true, "the final save holds the model only"),
       String("export_dtype", "float32", "dtype of a model-only save",
              {"float16", "bfloat16", "float32"})},
      "checkpoint", "format",
      [](const auto& sections) { return BoolOf(sections, "checkpoint", "enable"); }));
  schema.push_back(Section(
      "activation_checkpoint", "recompute activations in backward to save memory",
      {String("mode", "selective", "which blocks recompute", {"none", "selective", "full"}),
       String("selective_ac_option", "2",
              "with mode = selective: \"N\" recomputes every Nth block, \"op\" recomputes all "
              "but the matmul outputs")}));
  schema.push_back(PluginSection(
      "float8", "Float8 training (enabled by model.converters = [\"float8\"])",
      {String("recipe_name", "tensorwise",
              "float8 plugin: tensorwise, rowwise, rowwise_with_gw_hp"),
       Bool("enable_fsdp_float8_all_gather", false,
            "fsdp gathers the Float8 layers' weights in e4m3, one scale each (tensorwise "
            "recipe, data_parallel_shard_degree > 1)"),
       Bool("precompute_float8_dynamic_scale_for_fsdp", false,
            "with the float8 all-gather: every weight's scale in one pass and one all-reduce "
            "after each optimizer step, not one per unit's gather"),
       StringList("filter_fqns", {},
                  "linear layers (and routed expert weights, `layers.N.moe.experts.w1`) whose "
                  "name contains one of these stay in high precision")},
      "float8", "recipe_name", [](const auto& sections) {
        auto converters = sections.find("model")->second.GetStringList("converters");
        return converters.ok() &&
               std::find(converters->begin(), converters->end(), "float8") != converters->end();
      }));
  schema.push_back(Section(
      "metrics", "what is logged",
      {Int("log_freq", 10, 1, kNoLimit, "log every this many steps"),
       Float("peak_tflops", 0.0, 0.0, kNoLimit,
             "peak TFLOP/s of one rank's device, for MFU; 0: on a GPU its GEMM "
             "ceiling measured at start, on the CPU its theoretical peak (else a "
             "matmul probe)"),
       Bool("enable_tensorboard", false, "write TensorBoard event files of the logged metrics"),
       String("save_tb_folder", "tb",
              "TensorBoard folder under job.dump_folder; each run writes "
              "into a <YYYYmmdd-HHMM> folder inside it"),
       Bool("save_for_all_ranks", false,
            "every rank writes TensorBoard files of its own metrics (in "
            "rank_<R>), not rank 0 alone")}));
  schema.push_back(Section(
      "profiling", "step traces and memory snapshots",
      {Bool("enable_profiling", false,
            "write a Chrome trace (trace-event JSON) of every profile_freq-th step"),
       String("save_traces_folder", "profile_trace",
              "trace folder under job.dump_folder: iteration_<step>/rank<R>_trace.json"),
       Int("profile_freq", 10, 1, kNoLimit, "profile the steps that are multiples of this"),
       Bool("enable_memory_snapshot", false,
            "write the live allocations and the peak at each profiled step and on out-of-memory"),
       String("save_memory_snapshot_folder", "memory_snapshot",
              "snapshot folder under job.dump_folder: "
              "iteration_<step>/rank<R>_memory_snapshot.json")}));
  schema.push_back(Section(
      "generate", "text sampled from the model after training",
      {Int("max_new_tokens", 0, 0, kNoLimit, "tokens to sample; 0: no sample"),
       String("prompt", "", "text the sample continues"),
       Float("temperature", 0.8, 0.0, kNoLimit, "softmax temperature; 0 always takes the top"),
       Int("top_k", 50, 0, kNoLimit, "sample among this many most likely tokens; 0: all"),
       Float("top_p", 0.95, 0.0, 1.0, "sample among the fewest tokens holding this probability")}));
  schema.push_back(PluginSection(
      "comm", "communication between ranks",
      {String("backend", "auto", "comm plugin: mpi, nccl, ...; auto = none for one rank, else mpi"),
       Int("init_timeout_seconds", 300, 1, kNoLimit,
           "limit for joining the job and for each collective until the first step is done"),
       Int("train_timeout_seconds", 100, 1, kNoLimit,
           "limit for one collective after the first step"),
       Int("trace_buf_size", 20000, 0, kNoLimit, "collectives kept by the flight recorder")},
      "comm", "backend", [](const auto& sections) {
        auto backend = sections.find("comm")->second.GetString("backend");
        return backend.ok() && *backend != "auto";
      }));
  schema.push_back(PluginSection(
      "control_plane", "devolved controllers watching the ranks (docs/control-plane.md)",
      {Bool("enable", false, "run the control plane"),
       String("policy", "greedy", "balance plugin assigning workers to controllers"),
       Int("controllers", 2, 1, kMaxRanks,
           "controller ranks, one per node first (unless listed, by the key below or the "
           "topology file)"),
       StringList("controller_ranks", {},
                  "these ranks control (e.g. [\"0\", \"4\"]), instead of the count"),
       String("topology", "",
              "titan-lbdc topology file (.json/.toml) placing rank R at switch rankR or under "
              "its host's switch; empty: from hostnames"),
       Int("hops", 4, 0, kNoLimit,
           "potential controllers of a rank: those within this many hops (2: same node)"),
       Float("rebalance_threshold", 0.2, 0.0, kNoLimit,
             "re-balance when a rank's load changed by more than this fraction"),
       Float("heartbeat_timeout_seconds", 10.0, 0.001, kNoLimit,
             "name a worker whose report is this late; a controller silent this long is lost"),
       Float("straggler_factor", 3.0, 1.0, kNoLimit,
             "a straggler's busy time exceeds this many times its group's others' median"),
       Int("debug_slow_rank", -1, -1, kMaxRanks, "debug: this rank sleeps after each step"),
       Float("debug_slow_seconds", 0.0, 0.0, kNoLimit, "debug: how long debug_slow_rank sleeps"),
       Int("debug_lose_controller", -1, -1, kMaxRanks,
           "debug: this controller rank stops controlling (a lost controller)"),
       Int("debug_lose_at_step", 1, 1, kNoLimit, "debug: from this step on")},
      "balance", "policy",
      [](const auto& sections) { return BoolOf(sections, "control_plane", "enable"); }));
  schema.push_back(Section(
      "fault_tolerance",
      "replica groups, each its own launch, averaging their gradients over the groups alive "
      "(docs/fault-tolerance.md)",
      {Bool("enable", false, "this launch is one replica group of a fault-tolerant job"),
       Int("replica_id", 0, 0, kMaxRanks, "this group's id, 0 .. group_size - 1"),
       Int("group_size", 0, 0, kMaxRanks, "the replica groups the job starts with"),
       Int("min_replica_size", 1, 1, kMaxRanks,
           "fewer groups alive than this stops the survivors with an error"),
       String("process_group", "gloo", "the communicator across the groups", {"gloo"}),
       Int("process_group_timeout_ms", 10000, 1, kNoLimit,
           "limit for connecting the groups' communicator and for each of its all-reduces"),
       String("store_folder", "",
              "a folder every group reaches (a shared filesystem), new for each run: the "
              "quorum's files and the communicator's rendezvous; a group started on a folder "
              "whose run is under way rejoins it (or etcd_endpoints)"),
       StringList("etcd_endpoints", {},
                  "instead of store_folder: the client URLs of an etcd cluster (one member per "
                  "node or group) that keeps the quorum and the rendezvous, so that losing a "
                  "minority of its members loses neither (e.g. "
                  "[\"http://node0:2379\", \"http://node1:2379\", \"http://node2:2379\"])"),
       String("etcd_prefix", "/titan",
              "etcd_endpoints: the keys' prefix, new for each run (as a store folder is)"),
       Int("heartbeat_timeout_ms", 10000, 1, kNoLimit,
           "a group whose heartbeat is silent this long is dead"),
       Int("join_timeout_ms", 60000, 1, kNoLimit,
           "how long a quorum waits for a group that does not join (never heard from, or "
           "hung), and a restarted group for its admission"),
       String("semi_sync_method", "",
              "\"\": every step averages the gradients over the groups; \"local_sgd\": each "
              "group steps on its own, and they average their parameters every sync_steps "
              "steps; \"diloco\": each group steps on its own, and every sync_steps steps an "
              "outer optimizer steps the synced parameters by the groups' mean change",
              {"", "local_sgd", "diloco"}),
       Int("sync_steps", 5, 1, kNoLimit,
           "local_sgd, diloco: inner steps between the groups' syncs"),
       Float("outer_lr", 0.7, 0, kNoLimit, "diloco: the outer SGD's learning rate"),
       Float("outer_momentum", 0.9, 0, 1,
             "diloco: the outer SGD's Nesterov momentum (0: plain SGD)"),
       Float("fragment_update_alpha", 0.0, 0, 1,
             "diloco: after a sync each group keeps this share of its local parameters and "
             "takes the rest from the synced ones (0: the synced parameters)"),
       Int("num_fragments", 1, 1, kNoLimit,
           "diloco: fragments synced in turn; only 1 (the whole model) is implemented"),
       Int("fragment_sync_delay", 0, 0, kNoLimit,
           "diloco: inner steps a sync may overlap; only 0 is implemented"),
       Bool("should_quantize", false,
            "diloco: quantize the pseudo-gradients for the sync; only false is implemented")}));
  schema.push_back(
      Section("debug", "reproducibility",
              {Int("seed", 0, 0, kNoLimit, "seed for initialisation and data order"),
               Bool("moe_force_load_balance", false,
                    "debug: routed experts chosen round-robin, every expert as many tokens "
                    "(TorchTitan's); refused on a dense model")}));
  return schema;
}

}  // namespace

const std::vector<SectionSchema>& RecipeSchema() {
  static const std::vector<SectionSchema> schema = MakeSchema();
  return schema;
}

}  // namespace titan
