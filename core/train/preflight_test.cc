#include "core/train/preflight.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/data/bpe_tokenizer.h"

namespace titan {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

class PreflightTest : public testing::Test {
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
  std::string ErrorOf(const Recipe& recipe, const MeshShape& shape, PreflightOptions options = {}) {
    auto report = CheckBeforeTraining(recipe, *registry_, shape, options);
    EXPECT_FALSE(report.ok());
    return report.ok() ? "" : std::string(report.status().message());
  }

  fs::path dir_ = fs::temp_directory_path() / absl::StrCat("titan_preflight_test_", getpid());
  std::unique_ptr<PluginRegistry> registry_;
};

// The control plane's keys against the world, and a topology file that names every rank.
TEST_F(PreflightTest, ControlPlaneDebugRanksAndTopologyFile) {
  EXPECT_THAT(ErrorOf(Make("[control_plane]\nenable = true\ndebug_slow_rank = 2\n"), Mesh(2, 1)),
              HasSubstr("control_plane.debug_slow_rank = 2: expected -1 (none) or a rank below 2"));
  std::ofstream(Path("net.toml")) << "switches = [\"rank0\", \"rank1\", \"x\"]\n"
                                  << "links = [[\"rank0\", \"x\"], [\"rank1\", \"x\"]]\n";
  const std::string topology = absl::StrCat("topology = \"", Path("net.toml"), "\"\n");
  const std::string enabled = absl::StrCat("[control_plane]\nenable = true\n", topology);
  EXPECT_TRUE(CheckBeforeTraining(Make(enabled + "hops = 2\n"), *registry_, Mesh(2, 1)).ok());
  EXPECT_THAT(ErrorOf(Make(enabled + "hops = 0\ncontrollers = 1\n"), Mesh(2, 1)),
              HasSubstr("control_plane.hops = 0: rank 1 (switch 'rank1') has no controller"));
  EXPECT_THAT(ErrorOf(Make(enabled + "controller_ranks = [\"1\", \"one\"]\n"), Mesh(2, 1)),
              HasSubstr("control_plane.controller_ranks: \"one\" is not a rank number"));
  EXPECT_THAT(ErrorOf(Make(enabled + "controller_ranks = [\"2\"]\n"), Mesh(2, 1)),
              HasSubstr("control_plane.controller_ranks: rank 2 is not a rank of this job"));
  // Ranks the file places by host wait for the hostnames.
  EXPECT_TRUE(CheckBeforeTraining(Make(enabled), *registry_, Mesh(3, 1)).ok());
  std::ofstream(Path("bad.toml")) << "switches = [\"a\"]\nlinks = [[\"a\", \"b\"]]\n";
  EXPECT_THAT(ErrorOf(Make(absl::StrCat("[control_plane]\nenable = true\ntopology = \"",
                                        Path("bad.toml"), "\"\n")),
                      Mesh(2, 1)),
              HasSubstr("control_plane.topology: "));
}

TEST_F(PreflightTest, AGoodRecipePasses) {
  auto report = CheckBeforeTraining(Make(""), *registry_, Mesh(1, 2));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->warnings.empty());
  // The learned vocabulary is known only at start-up, and the report says so under tp.
  ASSERT_EQ(report->unchecked.size(), 1u);
  EXPECT_THAT(report->unchecked[0], HasSubstr("learned from the data at start-up"));
  auto single = CheckBeforeTraining(Make(""), *registry_, Mesh(1, 1));
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_TRUE(single->unchecked.empty());
}

// debugmodel has 16 heads, 16 kv heads and a hidden dim of 768.
TEST_F(PreflightTest, TensorParallelDegreeMustDivideHeadsFeaturesAndSequence) {
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

TEST_F(PreflightTest, AKnownVocabularyMustDivideToo) {
  // 256 byte tokens and one merge, plus Llama 3's 256 special tokens: 513.
  std::vector<std::string> ranks;
  for (int byte = 0; byte < 256; ++byte) ranks.emplace_back(1, static_cast<char>(byte));
  ranks.push_back("ab");
  ASSERT_TRUE(WriteTiktoken(ranks, Path("v.tiktoken")).ok());
  const Recipe recipe = Make(absl::StrCat("[model]\ntokenizer_path = \"", Path("v.tiktoken"),
                                          "\"\n[parallelism]\ntensor_parallel_degree = 2"));
  PreflightOptions read;
  read.check_files = true;
  EXPECT_THAT(ErrorOf(recipe, Mesh(1, 2), read),
              HasSubstr("with model.flavor = \"debugmodel\" and a vocabulary of 513: tensor "
                        "parallel degree 2: expected it to divide the model's vocab_size"));
  // Without reading the file (a run: the model checks once it is loaded) it passes.
  EXPECT_TRUE(CheckBeforeTraining(recipe, *registry_, Mesh(1, 2)).ok());
  EXPECT_THAT(ErrorOf(Make("[model]\ntokenizer_path = \"/no/such.tiktoken\""), Mesh(1, 1), read),
              HasSubstr("t.toml:6:18: model.tokenizer_path: \"/no/such.tiktoken\": no such file"));
}

TEST_F(PreflightTest, ParallelPluginsCheckTheirKeys) {
  EXPECT_THAT(ErrorOf(Make("[parallelism]\ndisable_loss_parallel = true"), Mesh(1, 2)),
              HasSubstr("parallelism.disable_loss_parallel: expected false"));
  EXPECT_TRUE(CheckBeforeTraining(Make("[parallelism]\ndisable_loss_parallel = true"), *registry_,
                                  Mesh(1, 1))
                  .ok());
}

// fsdp's float8 all-gather (issue #18) needs fsdp and the tensorwise recipe's one e4m3 scale per
// weight; its precomputed scales need the all-gather.
TEST_F(PreflightTest, Float8AllGatherNeedsFsdpAndTheTensorwiseRecipe) {
  const std::string gather =
      "[model]\nconverters = [\"float8\"]\n[float8]\nenable_fsdp_float8_all_gather = true\n";
  EXPECT_TRUE(CheckBeforeTraining(Make(gather), *registry_, Mesh(2, 1)).ok());
  // data_parallel_shard_degree = -1 (the default) leaves it to the launched ranks: the run checks.
  auto report = CheckBeforeTraining(Make(gather), *registry_, Mesh(1, 1));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->unchecked,
              testing::Contains(HasSubstr("data_parallel_shard_degree = -1 leaves it 1 rank")));
  EXPECT_THAT(ErrorOf(Make(gather + "[parallelism]\ndata_parallel_shard_degree = 1\n"), Mesh(1, 1)),
              HasSubstr("t.toml:8:33: float8.enable_fsdp_float8_all_gather = true gathers weights "
                        "under fsdp, which this run does not shard "
                        "(parallelism.data_parallel_shard_degree = 1)"));
  EXPECT_THAT(ErrorOf(Make(gather + "recipe_name = \"rowwise\"\n"), Mesh(2, 1)),
              HasSubstr("only the tensorwise recipe uses, not float8.recipe_name = \"rowwise\""));
  EXPECT_THAT(ErrorOf(Make("[model]\nconverters = [\"float8\"]\n[float8]\n"
                           "precompute_float8_dynamic_scale_for_fsdp = true\n"),
                      Mesh(2, 1)),
              HasSubstr("float8.precompute_float8_dynamic_scale_for_fsdp = true needs "
                        "float8.enable_fsdp_float8_all_gather = true"));
  EXPECT_TRUE(
      CheckBeforeTraining(Make(gather + "precompute_float8_dynamic_scale_for_fsdp = true\n"),
                          *registry_, Mesh(2, 1))
          .ok());
}

TEST_F(PreflightTest, Float8KeysWithoutTheConverterAreWarnedAbout) {
  auto report = CheckBeforeTraining(Make("[float8]\nenable_fsdp_float8_all_gather = true\n"),
                                    *registry_, Mesh(2, 1));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->warnings,
              testing::Contains(HasSubstr(
                  "t.toml:6:33: float8.enable_fsdp_float8_all_gather = true has no effect: "
                  "model.converters does not include \"float8\"")));
}

TEST_F(PreflightTest, EmptyDumpFolderAndMissingDataAreRefused) {
  EXPECT_THAT(ErrorOf(Make("[job]\ndump_folder = \"\""), Mesh(1, 1)),
              HasSubstr("t.toml:6:15: job.dump_folder: expected a folder for the run's logs, "
                        "metrics and checkpoints, found an empty path"));
  auto raw = ParseRecipeText("[training]\ndataset_path = \"/no/such/corpus\"\n", "t.toml");
  auto recipe = ValidateRecipe(*raw, *registry_);
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  PreflightOptions files;
  files.check_files = true;
  EXPECT_THAT(ErrorOf(*recipe, Mesh(1, 1), files),
              HasSubstr("t.toml:2:16: training.dataset_path: \"/no/such/corpus\": no such file"));
  // A run leaves the data to its loader.
  EXPECT_TRUE(CheckBeforeTraining(*recipe, *registry_, Mesh(1, 1)).ok());
}

TEST_F(PreflightTest, ActivationCheckpointOptionIsCheckedBeforeTraining) {
  EXPECT_THAT(ErrorOf(Make("[activation_checkpoint]\nselective_ac_option = \"every\""), Mesh(1, 1)),
              HasSubstr("t.toml:6:23: activation_checkpoint.selective_ac_option: expected a "
                        "positive integer or \"op\", found 'every'"));
  auto full = CheckBeforeTraining(
      Make("[activation_checkpoint]\nmode = \"full\"\nselective_ac_option = \"op\""), *registry_,
      Mesh(1, 1));
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(full->warnings.size(), 1u);
  EXPECT_EQ(full->warnings[0],
            "t.toml:7:23: activation_checkpoint.selective_ac_option = \"op\" has no effect with "
            "activation_checkpoint.mode = \"full\"");
}

TEST_F(PreflightTest, WarmupLongerThanTrainingIsAWarningNamingBoth) {
  auto report = CheckBeforeTraining(
      Make("[lr_scheduler]\nwarmup_steps = 200", {"training.steps=10"}), *registry_, Mesh(1, 1));
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->warnings.size(), 1u);
  EXPECT_THAT(report->warnings[0],
              HasSubstr("lr_scheduler.warmup_steps = 200 is more than training.steps = 10"));
}

TEST_F(PreflightTest, SizesAreBoundedWithoutOverflow) {
  // 2^63 - 2 sequences: a multiple of local_batch_size 2, and more tokens than an int64 counts.
  EXPECT_THAT(ErrorOf(Make("", {"training.global_batch_size=9223372036854775806"}), Mesh(1, 1)),
              HasSubstr("training.global_batch_size = 9223372036854775806 x seq_len 16 tokens "
                        "overflow int64"));
  EXPECT_THAT(ErrorOf(Make("", {"training.global_batch_size=9"}), Mesh(1, 1)),
              HasSubstr("training.global_batch_size = 9 is not a multiple of local_batch_size 2"));
  EXPECT_THAT(ErrorOf(Make("", {"training.steps=4611686018427387904"}), Mesh(1, 1)),
              HasSubstr("x steps 4611686018427387904 tokens overflow int64"));
  // One microbatch's logits against the memory limit.
  PreflightOptions small;
  small.memory_bytes = 2 * 16 * 2048 * 4 - 1;  // batch x seq_len x vocabulary x f32, less one
  EXPECT_THAT(ErrorOf(Make(""), Mesh(1, 1), small),
              HasSubstr("the logits of one microbatch (tokens x 2048 vocabulary / 1 "
                        "tensor-parallel rank(s) x 4 bytes) take 262144 bytes, more than the "
                        "limit of 262143 bytes"));
  small.memory_bytes += 1;
  EXPECT_TRUE(CheckBeforeTraining(Make(""), *registry_, Mesh(1, 1), small).ok());
  EXPECT_THAT(ErrorOf(Make("", {"training.global_batch_size=4",
                                "validation.steps="
                                "4611686018427387904"}),
                      Mesh(1, 1)),
              HasSubstr("validation.steps = 4611686018427387904 x 2 microbatches per global "
                        "batch overflow int64"));
  EXPECT_THAT(ErrorOf(Make("", {"training.local_batch_size=4611686018427387904"}), Mesh(1, 1)),
              HasSubstr("overflow int64"));
}

TEST_F(PreflightTest, AccumulationAndTheDataBound) {
  auto accumulation = GradientAccumulation(Make("", {"training.global_batch_size=8"}), Mesh(2, 1));
  ASSERT_TRUE(accumulation.ok()) << accumulation.status();
  EXPECT_EQ(*accumulation, 2);  // 8 / (2 x 2 ranks)
  EXPECT_EQ(*GradientAccumulation(Make(""), Mesh(2, 1)), 1);
  EXPECT_TRUE(CheckGlobalBatchFitsData(8, 16, 8).ok());
  EXPECT_EQ(CheckGlobalBatchFitsData(9, 16, 8).message(),
            "training.global_batch_size = 9 sequences is more than the limit of 8 training "
            "window(s) of seq_len + 1 = 17 tokens the data holds: one optimizer step would "
            "repeat sequences; lower global_batch_size or seq_len, or give more data");
}

}  // namespace
}  // namespace titan
