#include "core/train/job_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/data/bpe_tokenizer.h"
#include "core/train/parallel_plugins.h"
#include "core/train/plan_plugins.h"
#include "core/train/preflight.h"

namespace titan {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

class JobPlanTest : public testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_);
    std::ofstream(Path("corpus.txt")) << "some text\n";
    registry_ = std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(absl::string_view name) const { return (dir_ / std::string(name)).string(); }

  // The debug model on corpus.txt, 2 x 16 tokens per microbatch, with `extra` sections and
  // command-line `overrides`.
  Recipe Make(absl::string_view extra, std::vector<std::string> overrides = {}) {
    const std::string text = absl::StrCat("[training]\ndataset_path = \"", Path("corpus.txt"),
                                          "\"\nseq_len = 16\nlocal_batch_size = 2\n", extra, "\n");
    auto raw = ParseRecipeText(text, "t.toml");
    EXPECT_TRUE(raw.ok()) << raw.status();
    for (const std::string& assignment : overrides)
      EXPECT_TRUE(ApplyOverride(*raw, assignment).ok());
    auto recipe = ValidateRecipe(*raw, *registry_);
    EXPECT_TRUE(recipe.ok()) << recipe.status();
    return std::move(recipe).value();
  }
  static MeshShape Mesh(int dp_shard, int tp) {
    MeshShape shape;
    shape.degrees[static_cast<int>(MeshDim::kDpShard)] = dp_shard;
    shape.degrees[static_cast<int>(MeshDim::kTp)] = tp;
    return shape;
  }
  std::string ErrorOf(const Recipe& recipe, const MeshShape& shape, PlanOptions options = {}) {
    auto report = BuildJobPlan(recipe, *registry_, shape, options);
    EXPECT_FALSE(report.ok());
    return report.ok() ? "" : std::string(report.status().message());
  }

  fs::path dir_ = fs::temp_directory_path() / absl::StrCat("titan_preflight_test_", getpid());
  std::unique_ptr<PluginRegistry> registry_;
};

// The control plane's keys against the world, and a topology file that names every rank.
TEST_F(JobPlanTest, ControlPlaneDebugRanksAndTopologyFile) {
  EXPECT_THAT(ErrorOf(Make("[control_plane]\nenable = true\ndebug_slow_rank = 2\n"), Mesh(2, 1)),
              HasSubstr("control_plane.debug_slow_rank = 2: expected -1 (none) or a rank below 2"));
  std::ofstream(Path("net.toml")) << "switches = [\"rank0\", \"rank1\", \"x\"]\n"
                                  << "links = [[\"rank0\", \"x\"], [\"rank1\", \"x\"]]\n";
  const std::string topology = absl::StrCat("topology = \"", Path("net.toml"), "\"\n");
  const std::string enabled = absl::StrCat("[control_plane]\nenable = true\n", topology);
  EXPECT_TRUE(BuildJobPlan(Make(enabled + "hops = 2\n"), *registry_, Mesh(2, 1)).ok());
  EXPECT_THAT(ErrorOf(Make(enabled + "hops = 0\ncontrollers = 1\n"), Mesh(2, 1)),
              HasSubstr("control_plane.hops = 0: rank 1 (switch 'rank1') has no controller"));
  EXPECT_THAT(ErrorOf(Make(enabled + "controller_ranks = [\"1\", \"one\"]\n"), Mesh(2, 1)),
              HasSubstr("control_plane.controller_ranks: \"one\" is not a rank number"));
  EXPECT_THAT(ErrorOf(Make(enabled + "controller_ranks = [\"2\"]\n"), Mesh(2, 1)),
              HasSubstr("control_plane.controller_ranks: rank 2 is not a rank of this job"));
  // Ranks the file places by host wait for the hostnames.
  EXPECT_TRUE(BuildJobPlan(Make(enabled), *registry_, Mesh(3, 1)).ok());
  std::ofstream(Path("bad.toml")) << "switches = [\"a\"]\nlinks = [[\"a\", \"b\"]]\n";
  EXPECT_THAT(ErrorOf(Make(absl::StrCat("[control_plane]\nenable = true\ntopology = \"",
                                        Path("bad.toml"), "\"\n")),
                      Mesh(2, 1)),
              HasSubstr("control_plane.topology: "));
}

// The plan reads every key once into typed settings and derives the sizes.
TEST_F(JobPlanTest, ReadsTypedSettingsAndDerivesSizes) {
  // The plan uses the plugins the recipe selected: the recipe outlives it.
  const Recipe recipe =
      Make("[validation]\nfreq = 5\n[generate]\nmax_new_tokens = 7\nprompt = \"The \"\n",
           {"training.mixed_precision_param=bfloat16", "training.global_batch_size=8",
            "checkpoint.folder=ck", "job.dump_folder=/tmp/d"});
  auto plan = BuildJobPlan(recipe, *registry_, Mesh(2, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->training.seq_len, 16);
  EXPECT_EQ(plan->training.global_batch_size, 8);
  EXPECT_EQ(plan->parallelism.accumulation, 2);  // 8 / (2 x 2 ranks)
  EXPECT_EQ(plan->parallelism.data_parallel_degree, 2);
  EXPECT_EQ(plan->training.matmul_dtype, DType::kBF16);
  EXPECT_EQ(plan->model.config.n_layers, LlamaFlavor("debugmodel")->n_layers);
  EXPECT_EQ(plan->validation.freq, 5);
  EXPECT_TRUE(plan->data.validation);
  EXPECT_EQ(plan->generate.max_new_tokens, 7);
  EXPECT_EQ(plan->generate.prompt, "The ");
  EXPECT_EQ(plan->checkpoint.root, "/tmp/d/ck");
  EXPECT_EQ(plan->checkpoint.plugin, nullptr);  // checkpoint.enable is off
  ASSERT_NE(plan->training.optimizer, nullptr);
  EXPECT_EQ(plan->job.device->type(), DeviceType::kCpu);
}

// The plan's parallel plugins, in the order they apply, each as its dimension and the roles it
// takes: "tp(shards,unshard)".
std::string DescribeRoles(const ParallelismPlan& parallel) {
  std::string out;
  for (const std::unique_ptr<ParallelPlugin>& plugin : parallel.plugins) {
    std::vector<std::string> roles;
    if (plugin->data_parallel() != nullptr) roles.push_back("data_parallel");
    if (plugin->parameter_shards() != nullptr) roles.push_back("shards");
    if (plugin->unsharding() != nullptr) roles.push_back("unshard");
    if (plugin->float8_gather() != nullptr) roles.push_back("float8_gather");
    if (plugin->pipeline() != nullptr) roles.push_back("pipeline");
    absl::StrAppend(&out, out.empty() ? "" : " ", MeshDimName(plugin->dimension()), "(",
                    absl::StrJoin(roles, ","), ")");
  }
  return out;
}

// Each parallel plugin is the one that serves its mesh dimension, created once by the plan, in
// the order they apply; each takes only the roles its dimension needs, and the plan finds the
// data-parallel and pipeline plugins by their role.
TEST_F(JobPlanTest, ParallelPluginsAreChosenByTheDimensionTheyServe) {
  auto fsdp_tp = BuildJobPlan(Make(""), *registry_, Mesh(2, 2));
  ASSERT_TRUE(fsdp_tp.ok()) << fsdp_tp.status();
  EXPECT_EQ(DescribeRoles(fsdp_tp->parallelism),
            "tp(shards,unshard) dp_shard(data_parallel,shards,unshard,float8_gather)");
  EXPECT_EQ(fsdp_tp->parallelism.data_parallel(),
            fsdp_tp->parallelism.plugins.back()->data_parallel());
  EXPECT_EQ(fsdp_tp->parallelism.pipeline(), nullptr);
  MeshShape replicas;
  replicas.degrees[static_cast<int>(MeshDim::kDpReplicate)] = 2;
  auto ddp = BuildJobPlan(Make(""), *registry_, replicas);
  ASSERT_TRUE(ddp.ok()) << ddp.status();
  EXPECT_EQ(DescribeRoles(ddp->parallelism), "dp_replicate(data_parallel)");
  EXPECT_NE(ddp->parallelism.data_parallel(), nullptr);
  MeshShape pp_cp;
  pp_cp.degrees[static_cast<int>(MeshDim::kPp)] = 2;
  pp_cp.degrees[static_cast<int>(MeshDim::kCp)] = 2;
  auto pipelined =
      BuildJobPlan(Make("", {"parallelism.pipeline_parallel_degree=2"}), *registry_, pp_cp);
  ASSERT_TRUE(pipelined.ok()) << pipelined.status();
  EXPECT_EQ(DescribeRoles(pipelined->parallelism), "pp(pipeline) cp(unshard)");
  EXPECT_EQ(pipelined->parallelism.pipeline(), pipelined->parallelism.plugins.front()->pipeline());
  EXPECT_EQ(pipelined->parallelism.data_parallel(), nullptr);
  auto single = BuildJobPlan(Make(""), *registry_, Mesh(1, 1));
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_TRUE(single->parallelism.plugins.empty());
  EXPECT_EQ(single->parallelism.data_parallel(), nullptr);
  // "auto" is no communicator on one rank, and a host-staging one that joins many ranks else.
  EXPECT_EQ(single->comm.plugin, nullptr);
  ASSERT_NE(fsdp_tp->comm.plugin, nullptr);
  EXPECT_TRUE(fsdp_tp->comm.plugin->traits().joins_many_ranks);
  EXPECT_TRUE(fsdp_tp->comm.plugin->traits().stages_through_host);
}

// The pp plugin's own start-up checks run while the plan is built (issue #39: --validate let a
// layer split through that the run refused).
TEST_F(JobPlanTest, ThePipelinePluginPlansItsStagesInThePlan) {
  MeshShape pp;
  pp.degrees[static_cast<int>(MeshDim::kPp)] = 2;
  const std::vector<std::string> layout = {
      "parallelism.pipeline_parallel_degree=2",
      "parallelism.pipeline_parallel_schedule=Interleaved1F1B"};
  std::vector<std::string> split = layout;
  split.push_back("parallelism.pipeline_parallel_layers_per_stage=3");
  EXPECT_THAT(ErrorOf(Make("", split), pp),
              HasSubstr("pipeline_parallel_layers_per_stage = 3 makes 3 stages"));
  // 0 is no split, not the default (-1) it used to act as.
  std::vector<std::string> none = layout;
  none.push_back("parallelism.pipeline_parallel_layers_per_stage=0");
  EXPECT_THAT(ErrorOf(Make("", none), pp),
              HasSubstr("command line --parallelism.pipeline_parallel_layers_per_stage=0: "
                        "parallelism.pipeline_parallel_layers_per_stage = 0: a stage holds at "
                        "least 1 layer"));
  auto plan = BuildJobPlan(Make("", layout), *registry_, pp);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->parallelism.plugins.size(), 1u);
  EXPECT_EQ(plan->parallelism.plugins[0]->dimension(), MeshDim::kPp);
  EXPECT_NE(plan->parallelism.pipeline(), nullptr);
  EXPECT_EQ(plan->parallelism.pipeline_microbatches, 2);  // local batch 2, microbatches of 1
}

// A format that keeps models only (CheckpointPlugin::holds_training_state) may save the final
// model alone: refused in the plan, not at the first save (issue #39).
TEST_F(JobPlanTest, AModelOnlyFormatIsRefusedForTrainingState) {
  const std::string safetensors = "[checkpoint]\nenable = true\nformat = \"safetensors\"\n";
  EXPECT_THAT(
      ErrorOf(Make(safetensors, {"training.steps=10", "checkpoint.interval=5"}), Mesh(1, 1)),
      HasSubstr("checkpoint.format = \"safetensors\" holds the model only, but "
                "checkpoint.interval = 5 saves the training state at step 5 of 10"));
  EXPECT_THAT(ErrorOf(Make(safetensors, {"training.steps=10", "checkpoint.interval=10",
                                         "checkpoint.last_save_model_only=false"}),
                      Mesh(1, 1)),
              HasSubstr("last_save_model_only = false saves the training state at the end"));
  EXPECT_TRUE(BuildJobPlan(Make(safetensors, {"training.steps=10", "checkpoint.interval=10"}),
                           *registry_, Mesh(1, 1))
                  .ok());
  EXPECT_TRUE(BuildJobPlan(Make("[checkpoint]\nenable = true\n",
                                {"training.steps=10", "checkpoint.interval=5"}),
                           *registry_, Mesh(1, 1))
                  .ok());
}

// A comm plugin that moves accelerator memory only cannot serve the CPU device (issue #39).
TEST_F(JobPlanTest, ADeviceOnlyCommunicatorNeedsAnAcceleratorDevice) {
  if (!registry_->Find("comm", "nccl").ok()) {
    GTEST_SKIP() << "this build has no nccl comm plugin (configured without CUDA or libnccl)";
  }
  EXPECT_THAT(ErrorOf(Make("[comm]\nbackend = \"nccl\"\n"), Mesh(2, 1)),
              HasSubstr("comm.backend = \"nccl\" moves buffers in accelerator memory only, but "
                        "job.device = \"cpu\" keeps them in host memory"));
  EXPECT_TRUE(BuildJobPlan(Make("[comm]\nbackend = \"mpi\"\n"), *registry_, Mesh(2, 1)).ok());
}

TEST_F(JobPlanTest, AGoodRecipePasses) {
  auto report = BuildJobPlan(Make(""), *registry_, Mesh(1, 2));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->warnings.empty());
  EXPECT_TRUE(report->unchecked.empty());
}

// --validate reads the data as the run does, with the run's code (issue #39: it passed what the
// run then refused): the global batch against the data's windows, the vocabulary learned from
// it against tp, without writing the vocabulary into the dump folder.
TEST_F(JobPlanTest, ValidationReadsTheDataAsTheRunDoes) {
  PlanOptions read;
  read.read_data = true;
  const std::string dump = absl::StrCat("job.dump_folder=", Path("dump"));
  // "some text": no window of 17 tokens, let alone a global batch of 2.
  EXPECT_THAT(ErrorOf(Make("", {dump}), Mesh(1, 1), read),
              HasSubstr("the data holds 0 window(s) of seq_len + 1 = 17 (12 tokens in 1 "
                        "shard(s)); one step needs 2"));
  {
    std::ofstream corpus(Path("corpus.txt"));
    for (int i = 0; i < 200; ++i) corpus << "line " << i << " of some text to learn from\n";
  }
  auto plan = BuildJobPlan(Make("", {dump}), *registry_, Mesh(1, 1), read);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(fs::exists(Path("dump")));
  // A learned vocabulary of 256 bytes, one merge and 256 special tokens does not split in two.
  EXPECT_THAT(
      ErrorOf(Make("[parallelism]\ntensor_parallel_degree = 2", {dump, "data.bpe_vocab_size=257"}),
              Mesh(1, 2), read),
      HasSubstr("and a vocabulary of 513: tensor parallel degree 2: expected it to divide "
                "the model's vocab_size"));
}

// debugmodel has 16 heads, 16 kv heads and a hidden dim of 768.
TEST_F(JobPlanTest, TensorParallelDegreeMustDivideHeadsFeaturesAndSequence) {
  const Recipe recipe = Make("[parallelism]\ntensor_parallel_degree = 3", {"training.seq_len=20"});
  std::string message = ErrorOf(recipe, Mesh(1, 3));
  EXPECT_THAT(message, HasSubstr("2 problems in the recipe:"));
  EXPECT_THAT(message, HasSubstr("training.seq_len = 20 is not divisible by "
                                 "parallelism.tensor_parallel_degree = 3"));
  EXPECT_THAT(message, HasSubstr("t.toml:6:26: parallelism.tensor_parallel_degree = 3 with "
                                 "model.flavor = \"debugmodel\": tensor parallel degree 3: "
                                 "expected it to divide the model's n_heads, found n_heads = 16"));
  EXPECT_THAT(ErrorOf(Make("[parallelism]\ntensor_parallel_degree = 32"), Mesh(1, 32)),
              HasSubstr("tensor parallel degree 32: expected it to divide the model's n_heads"));
}

TEST_F(JobPlanTest, AKnownVocabularyMustDivideToo) {
  // 256 byte tokens and one merge, plus Llama 3's 256 special tokens: 513.
  std::vector<std::string> ranks;
  for (int byte = 0; byte < 256; ++byte) ranks.emplace_back(1, static_cast<char>(byte));
  ranks.push_back("ab");
  ASSERT_TRUE(WriteTiktoken(ranks, Path("v.tiktoken")).ok());
  const Recipe recipe = Make(absl::StrCat("[model]\ntokenizer_path = \"", Path("v.tiktoken"),
                                          "\"\n[parallelism]\ntensor_parallel_degree = 2"));
  PlanOptions read;
  read.read_data = true;
  EXPECT_THAT(ErrorOf(recipe, Mesh(1, 2), read),
              HasSubstr("with model.flavor = \"debugmodel\" and a vocabulary of 513: tensor "
                        "parallel degree 2: expected it to divide the model's vocab_size"));
  // A run reads the tokenizer in its plan too.
  EXPECT_THAT(ErrorOf(recipe, Mesh(1, 2)), HasSubstr("and a vocabulary of 513"));
  EXPECT_THAT(ErrorOf(Make("[model]\ntokenizer_path = \"/no/such.tiktoken\""), Mesh(1, 1), read),
              HasSubstr("t.toml:6:18: model.tokenizer_path: \"/no/such.tiktoken\": no such file"));
}

TEST_F(JobPlanTest, ParallelPluginsCheckTheirKeys) {
  EXPECT_THAT(ErrorOf(Make("[parallelism]\ndisable_loss_parallel = true"), Mesh(1, 2)),
              HasSubstr("parallelism.disable_loss_parallel: expected false"));
  EXPECT_TRUE(
      BuildJobPlan(Make("[parallelism]\ndisable_loss_parallel = true"), *registry_, Mesh(1, 1))
          .ok());
}

// fsdp's float8 all-gather (issue #18) needs fsdp and the tensorwise recipe's one e4m3 scale per
// weight; its precomputed scales need the all-gather.
TEST_F(JobPlanTest, Float8AllGatherNeedsFsdpAndTheTensorwiseRecipe) {
  const std::string gather =
      "[model]\nconverters = [\"float8\"]\n[float8]\nenable_fsdp_float8_all_gather = true\n";
  EXPECT_TRUE(BuildJobPlan(Make(gather), *registry_, Mesh(2, 1)).ok());
  // data_parallel_shard_degree = -1 (the default) leaves it to the launched ranks: --validate
  // without a launcher notes it, a launched run refuses it.
  PlanOptions counted;
  counted.launched_world = false;
  auto report = BuildJobPlan(Make(gather), *registry_, Mesh(1, 1), counted);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->unchecked,
              testing::Contains(HasSubstr("data_parallel_shard_degree = -1 leaves it 1 rank")));
  EXPECT_THAT(ErrorOf(Make(gather), Mesh(1, 1)),
              HasSubstr("gathers weights under fsdp, which this run does not shard"));
  EXPECT_THAT(ErrorOf(Make(gather + "[parallelism]\ndata_parallel_shard_degree = 1\n"), Mesh(1, 1)),
              HasSubstr("t.toml:8:33: float8.enable_fsdp_float8_all_gather = true gathers weights "
                        "under fsdp, which this run does not shard "
                        "(parallelism.data_parallel_shard_degree = 1)"));
  EXPECT_THAT(ErrorOf(Make(gather + "recipe_name = \"rowwise\"\n"), Mesh(2, 1)),
              HasSubstr("only the tensorwise recipe uses, not float8.recipe_name = \"rowwise\""));
  EXPECT_THAT(ErrorOf(Make("[model]\nconverters = [\"float8\"]\n[float8]\n"
                           "precompute_float8_dynamic_scale_for_fsdp = true\n"),
                      Mesh(2, 1)),
              HasSubstr("t.toml:8:44: float8.precompute_float8_dynamic_scale_for_fsdp = true "
                        "needs float8.enable_fsdp_float8_all_gather = true"));
  EXPECT_TRUE(BuildJobPlan(Make(gather + "precompute_float8_dynamic_scale_for_fsdp = true\n"),
                           *registry_, Mesh(2, 1))
                  .ok());
}

TEST_F(JobPlanTest, Float8KeysWithoutTheConverterAreWarnedAbout) {
  auto report = BuildJobPlan(Make("[float8]\nenable_fsdp_float8_all_gather = true\n"), *registry_,
                             Mesh(2, 1));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->warnings,
              testing::Contains(HasSubstr(
                  "t.toml:6:33: float8.enable_fsdp_float8_all_gather = true has no effect: "
                  "model.converters does not include \"float8\"")));
}

// Over a comm plugin whose sends and receives run in the order issued (nccl), the pp plugin
// refuses the schedules whose grouped exchanges would wait on each other. The plan's stand-in
// mesh answers as that communicator does, so --validate refuses what the run refuses.
TEST_F(JobPlanTest, AnInOrderCommunicatorRefusesTheSchedulesThatWouldDeadlock) {
  MeshShape pp;
  pp.degrees[static_cast<int>(MeshDim::kPp)] = 2;
  for (const auto& [schedule, runs] :
       {std::pair<std::string, bool>{"1F1B", true}, {"Interleaved1F1B", false}}) {
    auto plan = BuildJobPlan(
        Make("", {"training.local_batch_size=8", "parallelism.pipeline_parallel_degree=2",
                  "parallelism.pipeline_parallel_schedule=" + schedule}),
        *registry_, pp);
    ASSERT_TRUE(plan.ok()) << plan.status();
    PlanningMesh in_order(pp, *plan->job.device, /*ordered_point_to_point=*/true);
    auto stages = plan->parallelism.pipeline()->PlanPipeline(
        static_cast<int>(plan->model.config.n_layers),
        static_cast<int>(plan->parallelism.pipeline_microbatches), in_order);
    EXPECT_EQ(stages.ok(), runs) << schedule << ": " << stages.status();
    if (!runs) {
      EXPECT_THAT(stages.status().message(),
                  HasSubstr("cannot run over this communicator, whose sends and receives run in "
                            "the order issued"));
    }
  }
}

TEST_F(JobPlanTest, EmptyDumpFolderAndMissingDataAreRefused) {
  EXPECT_THAT(ErrorOf(Make("[job]\ndump_folder = \"\""), Mesh(1, 1)),
              HasSubstr("t.toml:6:15: job.dump_folder: expected a folder for the run's logs, "
                        "metrics and checkpoints, found an empty path"));
  auto raw = ParseRecipeText("[training]\ndataset_path = \"/no/such/corpus\"\n", "t.toml");
  auto recipe = ValidateRecipe(*raw, *registry_);
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  PlanOptions files;
  files.read_data = true;
  EXPECT_THAT(ErrorOf(*recipe, Mesh(1, 1), files),
              HasSubstr("t.toml:2:16: training.dataset_path: \"/no/such/corpus\": no such file"));
  // A run refuses it in its plan too, with the same words.
  EXPECT_THAT(ErrorOf(*recipe, Mesh(1, 1)),
              HasSubstr("t.toml:2:16: training.dataset_path: \"/no/such/corpus\": no such file"));
}

TEST_F(JobPlanTest, ActivationCheckpointOptionIsCheckedBeforeTraining) {
  EXPECT_THAT(ErrorOf(Make("[activation_checkpoint]\nselective_ac_option = \"every\""), Mesh(1, 1)),
              HasSubstr("t.toml:6:23: activation_checkpoint.selective_ac_option: expected a "
                        "positive integer or \"op\", found 'every'"));
  auto full =
      BuildJobPlan(Make("[activation_checkpoint]\nmode = \"full\"\nselective_ac_option = \"op\""),
                   *registry_, Mesh(1, 1));
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(full->warnings.size(), 1u);
  EXPECT_EQ(full->warnings[0],
            "t.toml:7:23: activation_checkpoint.selective_ac_option = \"op\" has no effect with "
            "activation_checkpoint.mode = \"full\"");
}

TEST_F(JobPlanTest, WarmupLongerThanTrainingIsAWarningNamingBoth) {
  auto report = BuildJobPlan(Make("[lr_scheduler]\nwarmup_steps = 200", {"training.steps=10"}),
                             *registry_, Mesh(1, 1));
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->warnings.size(), 1u);
  EXPECT_THAT(report->warnings[0],
              HasSubstr("lr_scheduler.warmup_steps = 200 is more than training.steps = 10"));
}

// The run's allocation of the model would fail with a bare "cannot allocate" (issue #39): the
// parameters and gradients are checked against memory, as shared by the ranks that shard them.
TEST_F(JobPlanTest, AModelWhoseParametersCannotFitIsRefused) {
  LlamaConfig debug = LlamaFamily().Flavor("debugmodel").value();
  debug.vocab_size = 2048;  // the byte-pair vocabulary the recipe learns at most
  const int64_t state = debug.ParameterCount() * 8;
  PlanOptions memory;
  memory.memory_bytes = state - 1;
  EXPECT_THAT(ErrorOf(Make(""), Mesh(1, 1), memory),
              HasSubstr(absl::StrCat("model.flavor = \"debugmodel\" has ", debug.ParameterCount(),
                                     " parameters: with their gradients in f32 that is at least ",
                                     state, " bytes on each of 1 rank(s)")));
  // Two fsdp ranks hold half each.
  EXPECT_TRUE(BuildJobPlan(Make(""), *registry_, Mesh(2, 1), memory).ok());
  memory.memory_bytes = state;
  EXPECT_TRUE(BuildJobPlan(Make(""), *registry_, Mesh(1, 1), memory).ok());
}

TEST_F(JobPlanTest, SizesAreBoundedWithoutOverflow) {
  // 2^63 - 2 sequences: a multiple of local_batch_size 2, and more tokens than an int64 counts.
  EXPECT_THAT(ErrorOf(Make("", {"training.global_batch_size=9223372036854775806"}), Mesh(1, 1)),
              HasSubstr("training.global_batch_size = 9223372036854775806 x seq_len 16 tokens "
                        "overflow int64"));
  EXPECT_THAT(ErrorOf(Make("", {"training.global_batch_size=9"}), Mesh(1, 1)),
              HasSubstr("training.global_batch_size = 9 is not a multiple of local_batch_size 2"));
  EXPECT_THAT(ErrorOf(Make("", {"training.steps=4611686018427387904"}), Mesh(1, 1)),
              HasSubstr("x steps 4611686018427387904 tokens overflow int64"));
  // One microbatch's logits against the memory limit.
  PlanOptions small;
  small.memory_bytes = 2 * 16 * 2048 * 4 - 1;  // batch x seq_len x vocabulary x f32, less one
  EXPECT_THAT(ErrorOf(Make(""), Mesh(1, 1), small),
              HasSubstr("the logits of one microbatch (tokens x 2048 vocabulary / 1 "
                        "tensor-parallel rank(s) x 4 bytes) take 262144 bytes, more than the "
                        "limit of 262143 bytes"));
  small.memory_bytes += 1;
  EXPECT_THAT(ErrorOf(Make(""), Mesh(1, 1), small),
              HasSubstr("with their gradients in f32 that is at least"));
  small.memory_bytes = int64_t{1} << 30;
  EXPECT_TRUE(BuildJobPlan(Make(""), *registry_, Mesh(1, 1), small).ok());
  EXPECT_THAT(ErrorOf(Make("", {"training.global_batch_size=4",
                                "validation.steps="
                                "4611686018427387904"}),
                      Mesh(1, 1)),
              HasSubstr("validation.steps = 4611686018427387904 x 2 microbatches per global "
                        "batch overflow int64"));
  EXPECT_THAT(ErrorOf(Make("", {"training.local_batch_size=4611686018427387904"}), Mesh(1, 1)),
              HasSubstr("overflow int64"));
}

TEST_F(JobPlanTest, AccumulationAndTheDataBound) {
  auto accumulating =
      BuildJobPlan(Make("", {"training.global_batch_size=8"}), *registry_, Mesh(2, 1));
  ASSERT_TRUE(accumulating.ok()) << accumulating.status();
  EXPECT_EQ(accumulating->parallelism.accumulation, 2);  // 8 / (2 x 2 ranks)
  auto resolved = BuildJobPlan(Make(""), *registry_, Mesh(2, 1));
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->parallelism.accumulation, 1);
  EXPECT_EQ(resolved->training.global_batch_size, 4);  // -1: 2 x 2 ranks
  EXPECT_TRUE(CheckGlobalBatchFitsData(8, 16, 8).ok());
  EXPECT_EQ(CheckGlobalBatchFitsData(9, 16, 8).message(),
            "training.global_batch_size = 9 sequences is more than the limit of 8 training "
            "window(s) of seq_len + 1 = 17 tokens the data holds: one optimizer step would "
            "repeat sequences; lower global_batch_size or seq_len, or give more data");
}

TEST_F(JobPlanTest, NLayersGivesTheFlavorAnotherDepth) {
  auto plan =
      BuildJobPlan(Make("", {"model.flavor=8B", "model.n_layers=2"}), *registry_, Mesh(1, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  LlamaConfig want = *LlamaFlavor("8B");
  EXPECT_EQ(plan->model.config.n_layers, 2);
  EXPECT_EQ(plan->model.config.dim, want.dim);
  EXPECT_EQ(plan->model.config.hidden_dim(), want.hidden_dim());
  EXPECT_EQ(plan->model.config.n_kv_heads, want.n_kv_heads);
  EXPECT_THAT(
      ErrorOf(Make("", {"model.name=deepseek_v3", "model.flavor=debugmodel", "model.n_layers=1"}),
              Mesh(1, 1)),
      AllOf(HasSubstr("model.n_layers = 1 leaves no layer with experts"),
            HasSubstr("keeps its first 1 layer(s) dense")));
}

TEST_F(JobPlanTest, FaultToleranceIsReadAndWhatIsNotImplementedIsRefusedByName) {
  const std::string ft = absl::StrCat(
      "[fault_tolerance]\nenable = true\nreplica_id = 1\ngroup_size = 3\nstore_folder = \"",
      Path("store"), "\"\nheartbeat_timeout_ms = 2500\n");
  auto plan = BuildJobPlan(Make(ft), *registry_, Mesh(1, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->fault_tolerance.enable);
  EXPECT_EQ(plan->fault_tolerance.replica_id, 1);
  EXPECT_EQ(plan->fault_tolerance.group_size, 3);
  EXPECT_EQ(plan->fault_tolerance.heartbeat_timeout.count(), 2500);
  EXPECT_THAT(ErrorOf(Make(ft, {"fault_tolerance.sync_steps=10"}), Mesh(1, 1)),
              AllOf(HasSubstr("fault_tolerance.sync_steps"), HasSubstr("local_sgd")));
  auto local_sgd = BuildJobPlan(
      Make(ft, {"fault_tolerance.semi_sync_method=local_sgd", "fault_tolerance.sync_steps=10"}),
      *registry_, Mesh(1, 1));
  ASSERT_TRUE(local_sgd.ok()) << local_sgd.status();
  EXPECT_EQ(local_sgd->fault_tolerance.sync_steps, 10);
  EXPECT_FALSE(local_sgd->fault_tolerance.diloco);
  EXPECT_EQ(plan->fault_tolerance.sync_steps, 0);
  EXPECT_THAT(ErrorOf(Make(ft, {"fault_tolerance.semi_sync_method=local_sgd",
                                "fault_tolerance.outer_lr=1"}),
                      Mesh(1, 1)),
              AllOf(HasSubstr("fault_tolerance.outer_lr"), HasSubstr("\"diloco\" only")));

  const std::string diloco = "fault_tolerance.semi_sync_method=diloco";
  auto outer =
      BuildJobPlan(Make(ft, {diloco, "fault_tolerance.sync_steps=4", "fault_tolerance.outer_lr=0.5",
                             "fault_tolerance.fragment_update_alpha=0.25"}),
                   *registry_, Mesh(1, 1));
  ASSERT_TRUE(outer.ok()) << outer.status();
  EXPECT_TRUE(outer->fault_tolerance.diloco);
  EXPECT_EQ(outer->fault_tolerance.sync_steps, 4);
  EXPECT_EQ(outer->fault_tolerance.outer_lr, 0.5);
  EXPECT_EQ(outer->fault_tolerance.outer_momentum, 0.9);  // TorchTitan's
  EXPECT_EQ(outer->fault_tolerance.fragment_update_alpha, 0.25);
  for (const char* refused : {"num_fragments=2", "fragment_sync_delay=1", "should_quantize=true"}) {
    const std::string key = absl::StrCat("fault_tolerance.", refused);
    EXPECT_THAT(ErrorOf(Make(ft, {diloco, key}), Mesh(1, 1)),
                AllOf(HasSubstr(key.substr(0, key.find('='))), HasSubstr("not implemented")))
        << refused;
  }
  EXPECT_THAT(ErrorOf(Make(ft, {"fault_tolerance.replica_id=3"}), Mesh(1, 1)),
              HasSubstr("fault_tolerance.replica_id: 3 is not a group of group_size = 3"));
  EXPECT_THAT(ErrorOf(Make(ft, {"fault_tolerance.min_replica_size=4"}), Mesh(1, 1)),
              HasSubstr("fault_tolerance.min_replica_size"));
  EXPECT_THAT(ErrorOf(Make(ft, {"fault_tolerance.store_folder="}), Mesh(1, 1)),
              HasSubstr("fault_tolerance.store_folder"));
  const std::string etcd = "fault_tolerance.etcd_endpoints=http://n0:2379,http://n1:2379";
  auto in_etcd =
      BuildJobPlan(Make(ft, {"fault_tolerance.store_folder=", etcd}), *registry_, Mesh(1, 1));
  ASSERT_TRUE(in_etcd.ok()) << in_etcd.status();
  EXPECT_EQ(in_etcd->fault_tolerance.etcd_endpoints,
            (std::vector<std::string>{"http://n0:2379", "http://n1:2379"}));
  EXPECT_EQ(in_etcd->fault_tolerance.etcd_prefix, "/titan");
  EXPECT_THAT(ErrorOf(Make(ft, {etcd}), Mesh(1, 1)),
              AllOf(HasSubstr("fault_tolerance.etcd_endpoints"), HasSubstr("either")));
  EXPECT_THAT(
      ErrorOf(Make(ft, {"fault_tolerance.store_folder=", "fault_tolerance.etcd_endpoints=n0:2379"}),
              Mesh(1, 1)),
      HasSubstr("\"n0:2379\": expected a URL"));
  EXPECT_THAT(ErrorOf(Make(ft, {"fault_tolerance.store_folder=", etcd,
                                "fault_tolerance.etcd_prefix=run-1"}),
                      Mesh(1, 1)),
              HasSubstr("fault_tolerance.etcd_prefix"));
  EXPECT_THAT(ErrorOf(Make("[fault_tolerance]\nenable = true\n"), Mesh(1, 1)),
              HasSubstr("fault_tolerance.group_size"));
}

TEST_F(JobPlanTest, KeysOfADisabledFaultToleranceSectionAreWarnedAbout) {
  auto plan =
      BuildJobPlan(Make("[fault_tolerance]\nreplica_id = 1\n", {"fault_tolerance.outer_lr=0.5"}),
                   *registry_, Mesh(1, 1));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->fault_tolerance.enable);
  EXPECT_THAT(plan->warnings,
              testing::UnorderedElementsAre(
                  "t.toml:6:14: fault_tolerance.replica_id has no effect with "
                  "fault_tolerance.enable = false",
                  "command line --fault_tolerance.outer_lr=0.5: fault_tolerance.outer_lr has no "
                  "effect with "
                  "fault_tolerance.enable = false"));
  auto off = BuildJobPlan(Make("[fault_tolerance]\nenable = false\n"), *registry_, Mesh(1, 1));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_THAT(off->warnings, testing::IsEmpty());
}

}  // namespace
}  // namespace titan
