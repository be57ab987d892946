// titan-run as a user runs it: a separate process, its exit code and what it prints.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/support/shell.h"
#include "titan/abi.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using Result = titan::testing::ShellResult;

Result Shell(const std::string& command) { return titan::testing::RunShell(command); }

Result Titan(const std::string& args, const std::string& env = "") {
  Result result = Shell(absl::StrCat("cd ", TITAN_SOURCE_DIR, " && env -u TITAN_PLUGIN_PATH ", env,
                                     " ", TITAN_RUN, " ", args));
  EXPECT_FALSE(result.crashed) << result.output;
  EXPECT_THAT(result.output, Not(HasSubstr("terminate called")));
  return result;
}

const std::string kTestPlugins = TITAN_TEST_PLUGIN_DIR;

TEST(TitanRun, ListsPluginsWithKindNameVersionAbiPathAndSummary) {
  Result r = Titan("--list-plugins");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("KIND       NAME           VERSION  ABI  PATH / SUMMARY"));
  const std::string abi = std::to_string(TITAN_ABI_VERSION);
  EXPECT_THAT(r.output, testing::ContainsRegex("optimizer +adamw +1\\.0\\.0 +" + abi +
                                               " +/[^ ]*/lib/titan/"
                                               "plugins/titan_optimizer_adamw\\.so"));
  EXPECT_THAT(r.output, HasSubstr("AdamW: Adam with decoupled weight decay"));
  EXPECT_THAT(r.output, testing::ContainsRegex("device +cpu +1\\.0\\.0 +" + abi + " +<built-in>"));
}

TEST(TitanRun, DefaultRecipeValidatesAndListsItsPlugins) {
  // A tiny run of the default recipe: byte tokenizer, two steps of 2 x 16 tokens.
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_test_run_", getpid());
  Result r = Titan(
      "--recipe recipes/llama3_debug.toml --model.tokenizer_path=byte --training.steps=2 "
      "--training.seq_len=16 --training.local_batch_size=2 --validation.freq=0 "
      "--generate.max_new_tokens=4 --job.dump_folder=" +
      dump.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // metrics.jsonl: one JSON object per logged step (log_freq = 1) with the documented keys.
  std::ifstream metrics(dump / "metrics.jsonl");
  std::string line;
  int64_t expected_step = 1;
  while (std::getline(metrics, line)) {
    const nlohmann::json object = nlohmann::json::parse(line);
    EXPECT_EQ(object.at("step").get<int64_t>(), expected_step++) << line;
    for (const char* key : {"loss", "grad_norm", "lr", "tps", "tflops", "mfu", "mem_gib"}) {
      ASSERT_TRUE(object.contains(key) && object.at(key).is_number()) << key << " in " << line;
    }
    EXPECT_GT(object.at("loss").get<double>(), 0.0);
    EXPECT_GT(object.at("mem_gib").get<double>(), 0.0);
  }
  EXPECT_EQ(expected_step, 3) << "expected the two steps' objects";
  // The saved model samples text through titan-generate; greedy sampling is deterministic.
  const std::string generate =
      absl::StrCat(TITAN_GENERATE, " --model=", (dump / "model.arena").string(),
                   " --tokenizer=byte --prompt=Hi --max-new-tokens=5 "
                   "--temperature=0 --seq-len=16");
  Result first = Shell(generate), second = Shell(generate);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output, second.output);
  EXPECT_THAT(first.output, testing::StartsWith("Hi"));
  Result wrong_flavor = Shell(generate + " --flavor=llama3_8b_no_such_flavor");
  EXPECT_EQ(wrong_flavor.exit_code, 1) << wrong_flavor.output;
  Result bad_file = Shell(
      absl::StrCat(TITAN_GENERATE, " --model=", dump.string(), "/metrics.jsonl --tokenizer=byte"));
  EXPECT_EQ(bad_file.exit_code, 1);
  EXPECT_THAT(bad_file.output, HasSubstr("metrics.jsonl (byte 8): expected the magic"));
  std::filesystem::remove_all(dump);
  EXPECT_THAT(r.output, testing::ContainsRegex("step 2\\] loss [0-9.]+  grad_norm"));
  EXPECT_THAT(r.output, HasSubstr("[generate] sample:"));
  EXPECT_THAT(r.output,
              HasSubstr("[rank 0 step -] [job] uses device plugin 'cpu' 1.0.0 (<built-in>)"));
  EXPECT_THAT(r.output, HasSubstr("[optimizer] uses optimizer plugin 'adamw' 1.0.0"));
  EXPECT_THAT(r.output,
              HasSubstr("recipe is valid; mesh pp=1 dp_replicate=1 dp_shard=1 cp=1 tp=1"));
}

TEST(TitanRun, TrainingDataErrorsAreExplained) {
  Result missing = Titan(
      "--recipe recipes/llama3_debug.toml --model.tokenizer_path=byte "
      "--training.dataset_path=/nonexistent/corpus");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.output, HasSubstr("\"/nonexistent/corpus\": no such file or folder"));
  Result vocab =
      Titan("--recipe recipes/llama3_debug.toml --model.tokenizer_path=/nonexistent/tok.model");
  EXPECT_EQ(vocab.exit_code, 2);
  EXPECT_THAT(vocab.output, HasSubstr("\"/nonexistent/tok.model\": no such file or folder; "
                                      "expected a tiktoken rank file"));
}

TEST(TitanRun, NonFiniteLossStopsTheRunNamingTheStep) {
  // An absurd learning rate blows the weights up after the first update.
  Result r = Titan(
      "--recipe recipes/llama3_debug.toml --model.tokenizer_path=byte --training.steps=5 "
      "--training.seq_len=16 --training.local_batch_size=2 --validation.freq=0 "
      "--lr_scheduler.warmup_steps=0 --optimizer.lr=1e30 --generate.max_new_tokens=0 "
      "--job.dump_folder=" +
      (std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_nan_", getpid())).string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output,
              testing::ContainsRegex("step [2-5]: the (loss|gradient norm) is (nan|inf)"));
  std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                              absl::StrCat("titan_cli_nan_", getpid()));
}

// A run resumed from step 1 after reaching step 2 keeps the history of step 1, drops step 2's
// row and logs step 2 again: each step once, in order.
TEST(TitanRun, AResumedRunKeepsTheMetricsHistory) {
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_metrics_", getpid());
  std::filesystem::create_directories(dump);
  {
    std::ofstream corpus(dump / "corpus.txt");
    for (int i = 0; i < 40; ++i) corpus << "fortune number " << i << " says hello\n%\n";
  }
  const std::string run = absl::StrCat(
      "--recipe recipes/llama3_debug.toml --training.dataset_path=", (dump / "corpus.txt").string(),
      " --model.tokenizer_path=byte --training.seq_len=16 "
      "--training.local_batch_size=2 --validation.freq=0 --generate.max_new_tokens=0 "
      "--metrics.log_freq=1 --checkpoint.enable=true --checkpoint.interval=1 "
      "--checkpoint.last_save_model_only=false --job.dump_folder=",
      dump.string());
  Result first = Titan(run + " --training.steps=2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  Result resumed = Titan(run + " --training.steps=2 --checkpoint.load_step=1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output,
              HasSubstr("[metrics] resumed after step 1: " + (dump / "metrics.jsonl").string() +
                        " keeps the rows up to it, 1 row(s) past it dropped"));
  std::ifstream in(dump / "metrics.jsonl");
  std::vector<int64_t> steps;
  for (std::string line; std::getline(in, line);) {
    steps.push_back(nlohmann::json::parse(line).at("step").get<int64_t>());
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2}));
  std::filesystem::remove_all(dump);
}

// A damaged metrics.jsonl on resume: the valid rows stay, each damaged line is named, and the
// checkpoint's own row, cut short here, comes back from the checkpoint.
TEST(TitanRun, AResumedRunRepairsADamagedMetricsHistory) {
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_damaged_", getpid());
  std::filesystem::remove_all(dump);
  const std::string run = absl::StrCat(
      "--recipe recipes/llama3_debug.toml --model.tokenizer_path=byte --training.seq_len=16 "
      "--training.local_batch_size=2 --validation.freq=0 --generate.max_new_tokens=0 "
      "--metrics.log_freq=1 --checkpoint.enable=true --checkpoint.interval=1 "
      "--checkpoint.last_save_model_only=false --job.dump_folder=",
      dump.string());
  Result first = Titan(run + " --training.steps=2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  std::vector<std::string> rows;
  {
    std::ifstream in(dump / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) rows.push_back(line);
  }
  ASSERT_EQ(rows.size(), 2u);
  std::ofstream(dump / "metrics.jsonl", std::ios::trunc | std::ios::binary)
      << rows[0] << "\n\x9c\xfe random bytes \x01\n"
      << rows[1].substr(0, rows[1].size() / 2);
  Result resumed = Titan(run + " --training.steps=3");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr((dump / "metrics.jsonl").string() +
                                        ": line(s) 2-3 are no metrics row (a damaged file?)"));
  EXPECT_THAT(resumed.output, HasSubstr("step 2's row was lost and is logged again from the "
                                        "checkpoint"));
  std::vector<std::string> after;
  {
    std::ifstream in(dump / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) after.push_back(line);
  }
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after[0], rows[0]);
  EXPECT_EQ(after[1], rows[1]);  // as first logged, from the checkpoint
  EXPECT_EQ(nlohmann::json::parse(after[2]).at("step"), 3);
  std::filesystem::remove_all(dump);
}

TEST(TitanTokenize, ShardsTrainWithDataFormatTokensAndCorruptionIsNamed) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_shards_", getpid());
  std::filesystem::create_directories(dir);
  {
    std::ofstream corpus(dir / "corpus.txt");
    for (int i = 0; i < 40; ++i) corpus << "fortune number " << i << " says hello\n%\n";
  }
  const std::string shards = (dir / "shards").string();
  Result tokenize = Shell(absl::StrCat(TITAN_TOKENIZE, " --input=", (dir / "corpus.txt").string(),
                                       " --tokenizer=byte --text-separator=% --threads=2 "
                                       "--output=",
                                       shards));
  ASSERT_EQ(tokenize.exit_code, 0) << tokenize.output;
  EXPECT_THAT(tokenize.output, testing::ContainsRegex("40 documents, [0-9]+ tokens in 1 shard"));
  EXPECT_THAT(tokenize.output, HasSubstr("tokens/s with 2 thread(s)"));
  EXPECT_THAT(tokenize.output, Not(HasSubstr("warning")));
  // A binary file taken for text (no extension) is tokenized, with a warning naming it.
  std::filesystem::create_directories(dir / "mixed");
  std::filesystem::copy_file(dir / "corpus.txt", dir / "mixed" / "corpus.txt");
  std::ofstream(dir / "mixed" / "program", std::ios::binary) << std::string(
      "\x7f"
      "ELF\0\0",
      6);
  Result binary =
      Shell(absl::StrCat(TITAN_TOKENIZE, " --input=", (dir / "mixed").string(),
                         " --tokenizer=byte --output=", (dir / "mixed_shards").string()));
  ASSERT_EQ(binary.exit_code, 0) << binary.output;
  EXPECT_THAT(binary.output,
              HasSubstr("titan-tokenize: warning: 1 file(s) read as text look binary (NUL bytes in "
                        "the first 8 KiB), the first: " +
                        (dir / "mixed" / "program").string()));
  const std::string run =
      "--recipe recipes/llama3_debug.toml --data.format=tokens --training.steps=2 "
      "--training.seq_len=16 --training.local_batch_size=2 --validation.freq=0 "
      "--generate.max_new_tokens=0 --job.dump_folder=" +
      (dir / "out").string() + " --training.dataset_path=" + shards;
  Result trained = Titan(run + " --model.tokenizer_path=byte");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_THAT(trained.output, HasSubstr("tokens from 1 shard(s)"));
  Result no_tokenizer = Titan(run);
  EXPECT_EQ(no_tokenizer.exit_code, 2);
  EXPECT_THAT(no_tokenizer.output, HasSubstr("needs the tokenizer the shards were made with"));
  const std::filesystem::path shard = std::filesystem::path(shards) / "shard_00000.tok";
  std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 3);
  Result corrupt = Titan(run + " --model.tokenizer_path=byte");
  EXPECT_EQ(corrupt.exit_code, 1);  // data loss: a runtime failure, not a recipe error
  EXPECT_THAT(corrupt.output, HasSubstr(shard.string() + ": the header (byte 16) announces"));
  std::filesystem::remove_all(dir);
}

// A Qwen3 MoE run logs its experts' loads in metrics.jsonl (each step: 6 blocks x 2 x 16 tokens
// x 2 choices spread over the 8 experts), and titan-generate samples the saved model when told
// its family; told another, it refuses.
TEST(TitanRun, AMixtureOfExpertsLogsItsLoadsAndSamples) {
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_test_moe_", getpid());
  Result r = Titan(
      "--recipe recipes/qwen3_moe_debug.toml --model.tokenizer_path=byte --training.steps=2 "
      "--training.seq_len=16 --training.local_batch_size=2 --validation.freq=0 "
      "--generate.max_new_tokens=0 --job.dump_folder=" +
      dump.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[model] qwen3 debugmodel_moe with 6 layers and vocabulary"));
  EXPECT_THAT(r.output, testing::ContainsRegex("experts max/mean [0-9.]+"));
  std::ifstream metrics(dump / "metrics.jsonl");
  std::string line;
  int rows = 0;
  while (std::getline(metrics, line)) {
    const nlohmann::json object = nlohmann::json::parse(line);
    ASSERT_TRUE(object.contains("expert_tokens")) << line;
    const std::vector<int64_t> tokens = object.at("expert_tokens").get<std::vector<int64_t>>();
    ASSERT_EQ(tokens.size(), 8u) << line;
    EXPECT_EQ(std::accumulate(tokens.begin(), tokens.end(), int64_t{0}), 6 * 2 * 16 * 2) << line;
    EXPECT_GE(object.at("expert_imbalance").get<double>(), 1.0) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 2);
  const std::string generate =
      absl::StrCat(TITAN_GENERATE, " --model=", (dump / "model.arena").string(),
                   " --tokenizer=byte --prompt=Hi --max-new-tokens=3 --temperature=0 --seq-len=16");
  Result sampled = Shell(generate + " --name=qwen3 --flavor=debugmodel_moe");
  ASSERT_EQ(sampled.exit_code, 0) << sampled.output;
  EXPECT_THAT(sampled.output, testing::StartsWith("Hi"));
  Result llama = Shell(generate + " --flavor=debugmodel_moe");
  EXPECT_EQ(llama.exit_code, 1) << llama.output;
  EXPECT_THAT(llama.output, HasSubstr("llama3 has no flavor 'debugmodel_moe'"));
  std::filesystem::remove_all(dump);
}

// The large presets name TorchTitan's tokenizer file and no dataset: --validate says so, and
// passes them with files this machine has, each for a launch of as many ranks as its model
// needs here (the parameters and gradients of a rank's share within this machine's 24 GiB, the
// global batch within the fortunes' windows).
TEST(TitanRun, EveryShippedRecipeValidates) {
  const std::string files =
      " --model.tokenizer_path=byte --training.dataset_path=/usr/share/games/fortunes";
  const std::map<std::string, std::string> launches = {
      {"llama3_8b", "OMPI_COMM_WORLD_SIZE=8"},
      {"llama3_70b", "OMPI_COMM_WORLD_SIZE=64"},
      {"llama3_405b", "OMPI_COMM_WORLD_SIZE=512"},
      {"qwen3_30b_a3b", "OMPI_COMM_WORLD_SIZE=16"},
      {"deepseek_v3_16b", "OMPI_COMM_WORLD_SIZE=8"},
      {"deepseek_v3_671b", "OMPI_COMM_WORLD_SIZE=512"}};
  int recipes = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(TITAN_SOURCE_DIR) + "/recipes")) {
    const std::string name = entry.path().stem().string();
    const bool debug = name.find("_debug") != std::string::npos;
    auto launch = launches.find(name);
    ASSERT_TRUE(debug || launch != launches.end()) << name << " needs a launch in this test";
    // 671B's 512 ranks of 4 sequences of 4096 tokens would need more text than the fortunes.
    const std::string batch = name == "deepseek_v3_671b" ? " --training.local_batch_size=1" : "";
    Result r = Titan(
        absl::StrCat("--recipe recipes/", name, ".toml --validate", debug ? "" : files + batch),
        debug ? "" : launch->second);
    EXPECT_EQ(r.exit_code, 0) << name << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr("recipe is valid for ")) << name;
    ++recipes;
  }
  EXPECT_GE(recipes, 10);  // llama3's four, qwen3's three, deepseek_v3's three
  Result as_shipped = Titan("--recipe recipes/llama3_8b.toml --validate");
  EXPECT_EQ(as_shipped.exit_code, 2);
  EXPECT_THAT(as_shipped.output,
              HasSubstr("llama3_8b.toml: (default value): training.dataset_path: "
                        "is empty"));
  EXPECT_THAT(as_shipped.output,
              HasSubstr("model.tokenizer_path: "
                        "\"./assets/tokenizer/original/tokenizer.model\": no such file"));
}

// --validate refuses what the run would refuse, before any rank starts.
TEST(TitanRun, ValidateChecksWhatTheRunChecks) {
  const std::string debug = "--recipe recipes/llama3_debug.toml --validate ";
  Result pp = Titan(debug +
                    "--parallelism.pipeline_parallel_degree=2 "
                    "--parallelism.pipeline_parallel_microbatch_size=3");
  EXPECT_EQ(pp.exit_code, 2);
  EXPECT_THAT(pp.output, HasSubstr("is not a multiple of"));
  EXPECT_THAT(pp.output, HasSubstr("parallelism.pipeline_parallel_microbatch_size = 3 (the "
                                   "pipeline splits each local batch into microbatches"));
  Result cp = Titan(debug +
                    "--parallelism.context_parallel_degree=3 --training.seq_len=128 "
                    "--parallelism.data_parallel_shard_degree=1");
  EXPECT_EQ(cp.exit_code, 2);
  EXPECT_THAT(cp.output, HasSubstr("training.seq_len = 128 is not divisible by 6 = 2 x "
                                   "parallelism.context_parallel_degree (3)"));
  Result tp3 = Titan(debug + "--parallelism.tensor_parallel_degree=3");
  EXPECT_EQ(tp3.exit_code, 2);
  EXPECT_THAT(tp3.output, HasSubstr("checking the recipe for 3 rank(s)"));
  EXPECT_THAT(tp3.output, HasSubstr("tensor parallel degree 3: expected it to divide the "
                                    "model's n_heads, found n_heads = 16"));
  EXPECT_THAT(tp3.output, HasSubstr("training.seq_len = 128 is not divisible by "
                                    "parallelism.tensor_parallel_degree = 3"));
  Result loss = Titan(debug +
                      "--parallelism.tensor_parallel_degree=2 "
                      "--parallelism.disable_loss_parallel=true");
  EXPECT_EQ(loss.exit_code, 2);
  EXPECT_THAT(loss.output, HasSubstr("parallelism.disable_loss_parallel: expected false"));
  // A mesh of 4 ranks launched as 2: the launcher's world is the one checked.
  Result ranks =
      Titan(debug + "--parallelism.data_parallel_shard_degree=4", "OMPI_COMM_WORLD_SIZE=2");
  EXPECT_EQ(ranks.exit_code, 2);
  EXPECT_THAT(ranks.output, HasSubstr("pp*dp_replicate*dp_shard*cp*tp = 1*1*4*1*1 = 4, but 2 "
                                      "ranks were launched"));
  // The vocabulary is learned from the data, as the run learns it, and checked against tp.
  Result tp2 = Titan(debug + "--parallelism.tensor_parallel_degree=2");
  EXPECT_EQ(tp2.exit_code, 0) << tp2.output;
  EXPECT_THAT(tp2.output, HasSubstr("[data] learned a BPE vocabulary of 1792 tokens"));
  EXPECT_THAT(tp2.output, Not(HasSubstr("not checked yet")));
  EXPECT_THAT(tp2.output, HasSubstr("recipe is valid for 2 rank(s)"));
}

// Issue #39's examples of what --validate let pass and the run refused: both now refuse them,
// with the same message, since both build the same job plan.
TEST(TitanRun, ValidateAndTheRunRefuseTheSame) {
  const std::string debug =
      "--recipe recipes/llama3_debug.toml --training.steps=1 --generate.max_new_tokens=0 ";
  const std::string split =
      "--parallelism.pipeline_parallel_degree=2 --parallelism.pipeline_parallel_layers_per_stage=3 "
      "--parallelism.pipeline_parallel_schedule=Interleaved1F1B";
  const std::string nccl = "--comm.backend=nccl --job.device=cpu";
  std::vector<std::string> cases = {split};
  // The nccl plugin is built where the CUDA toolkit and libnccl are (no GPU needed to load it).
  if (absl::StrContains(Titan("--list-plugins").output, "titan_comm_nccl.so"))
    cases.push_back(nccl);
  for (const std::string& bad : cases) {
    Result validated = Titan(debug + "--validate " + bad);
    Result run = Titan(debug + bad, "OMPI_COMM_WORLD_SIZE=2");
    EXPECT_EQ(validated.exit_code, 2) << validated.output;
    EXPECT_EQ(run.exit_code, 2) << run.output;
    const std::string reason = bad == split
                                   ? "parallelism.pipeline_parallel_layers_per_stage = 3 makes 3 "
                                     "stages of 6 layers (+ 1 + 1 for the embedding and output), "
                                     "which 2 pp ranks cannot share evenly"
                                   : "comm.backend = \"nccl\" moves buffers in accelerator "
                                     "memory only, but job.device = \"cpu\" keeps them in host "
                                     "memory";
    EXPECT_THAT(validated.output, HasSubstr(reason));
    EXPECT_THAT(run.output, HasSubstr(reason));
  }
}

TEST(TitanRun, DescriptionAndDatasetAreLogged) {
  Result r = Titan(
      "--recipe recipes/llama3_debug.toml --validate \"--job.description=my first run\" "
      "--training.dataset=quotes");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[job] \"my first run\" on dataset \"quotes\""));
}

// OpenMP threads sleep when idle unless the user chose otherwise: titan-run sets
// OMP_WAIT_POLICY=passive and starts again when it is unset (libgomp reads it before main).
TEST(TitanRun, IdleOpenMpThreadsWaitPassivelyUnlessTheUserSaysOtherwise) {
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_wait_policy_", getpid());
  const std::string args = absl::StrCat(
      "--recipe recipes/llama3_debug.toml --model.tokenizer_path=byte --training.steps=1 "
      "--training.seq_len=16 --training.local_batch_size=2 --validation.freq=0 "
      "--generate.max_new_tokens=0 --job.dump_folder=",
      dump.string());
  Result defaulted = Titan(args, "-u OMP_WAIT_POLICY -u TITAN_OMP_WAIT_POLICY_DEFAULTED");
  ASSERT_EQ(defaulted.exit_code, 0) << defaulted.output;
  EXPECT_THAT(defaulted.output,
              HasSubstr("idle ones wait by OMP_WAIT_POLICY=passive (titan's default)"));
  std::filesystem::remove_all(dump);
  Result chosen = Titan(args, "OMP_WAIT_POLICY=active");
  ASSERT_EQ(chosen.exit_code, 0) << chosen.output;
  EXPECT_THAT(chosen.output,
              HasSubstr("idle ones wait by OMP_WAIT_POLICY=active (set by the user)"));
  std::filesystem::remove_all(dump);
}

TEST(TitanRun, SizesAndFoldersAreBoundedOrWarned) {
  const std::string debug =
      "--recipe recipes/llama3_debug.toml --model.tokenizer_path=byte --training.seq_len=16 "
      "--training.local_batch_size=2 ";
  Result huge = Titan(debug + "--training.global_batch_size=9223372036854775806");
  EXPECT_EQ(huge.exit_code, 2);
  EXPECT_THAT(huge.output, HasSubstr("training.global_batch_size = 9223372036854775806 x seq_len "
                                     "16 tokens overflow int64"));
  // A global batch an int64 counts, but larger than the data: refused once the data is read.
  Result data = Titan(debug + "--training.global_batch_size=1099511627776 --validation.freq=0");
  EXPECT_EQ(data.exit_code, 2);
  EXPECT_THAT(data.output, HasSubstr("training.global_batch_size = 1099511627776 sequences is "
                                     "more than the limit of "));
  Result empty = Titan(debug + "--validate --job.dump_folder=");
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_THAT(empty.output, HasSubstr("command line --job.dump_folder=: job.dump_folder: expected "
                                      "a folder for the run's logs, metrics and checkpoints, found "
                                      "an empty path"));
  Result warmup = Titan(debug + "--validate --training.steps=10 --lr_scheduler.warmup_steps=20");
  EXPECT_EQ(warmup.exit_code, 0) << warmup.output;
  EXPECT_THAT(warmup.output,
              testing::ContainsRegex("\\[warn(ing)?\\].*command line "
                                     "--lr_scheduler.warmup_steps=20: lr_scheduler.warmup_steps = "
                                     "20 is more than training.steps = 10"));
}

TEST(TitanRun, MeshMustFitTheLaunchedRanks) {
  Result r = Titan("--recipe recipes/llama3_70b.toml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output,
              HasSubstr("pp*dp_replicate*cp*tp = 8 does not divide the 1 launched ranks"));
  // A launcher that claims 64 ranks around a process MPI sees alone (with files this machine
  // has, and ranks enough to share the model's memory).
  Result many = Titan(
      "--recipe recipes/llama3_70b.toml --model.tokenizer_path=byte "
      "--training.dataset_path=/usr/share/games/fortunes",
      "OMPI_COMM_WORLD_SIZE=64");
  EXPECT_EQ(many.exit_code, 1) << many.output;
  EXPECT_THAT(many.output, HasSubstr("64 ranks were launched: mpirun started 64 ranks "
                                     "(OMPI_COMM_WORLD_SIZE), but the comm plugin's world holds "
                                     "1 rank(s), this process being rank 0"));
}

TEST(TitanRun, PrintsTheEffectiveRecipeWithOverrides) {
  Result r = Titan(
      "--recipe recipes/llama3_debug.toml --print-recipe --training.steps=20 "
      "--optimizer.weight_decay=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[training]\nlocal_batch_size = 4\n"));
  EXPECT_THAT(r.output, HasSubstr("steps = 20\n"));
  EXPECT_THAT(r.output, HasSubstr("weight_decay = 0.0\n"));
  EXPECT_THAT(r.output, HasSubstr("[debug]\nseed = 0\n"));
}

TEST(TitanRun, RecipeErrorsNamePlaceAndKeyWithoutCrashing) {
  Result r = Titan("--recipe recipes/llama3_debug.toml --training.steps=ten --optimizer.lrr=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("command line --training.steps=ten: training.steps: expected "
                                  "integer, found 'ten'"));
  EXPECT_THAT(r.output, HasSubstr("optimizer.lrr: unknown key; did you mean 'lr'?"));
  Result missing = Titan("--recipe no/such.toml");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.output, HasSubstr("recipe file 'no/such.toml' does not exist"));
  Result garbage = Titan("--recipe " + std::string(TITAN_RUN) + " --validate");
  EXPECT_EQ(garbage.exit_code, 2);
  EXPECT_THAT(garbage.output, HasSubstr("not valid TOML"));
}

// Issue #39: every rank logged as rank 0 until it had read its placement, a usage error too.
TEST(TitanRun, ARankLogsAsItselfFromItsFirstLine) {
  Result r = Titan("--recipe recipes/llama3_debug.toml --bogus",
                   "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_LOCAL_RANK=1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[rank 1 step -] unknown argument '--bogus'"));
}

TEST(TitanRun, UnknownPluginListsTheAvailableOnes) {
  Result r = Titan("--recipe recipes/llama3_debug.toml --optimizer.name=adamx");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("optimizer.name: no optimizer plugin named 'adamx'; available "
                                  "optimizer plugins: adam, adamw, sgd; did you mean 'adamw'?"));
}

TEST(TitanRun, BadPluginFilesAreSkippedWithAWarningUnlessAskedFor) {
  Result abi = Titan("--list-plugins --plugin-dir " + kTestPlugins + "/bad_abi");
  EXPECT_EQ(abi.exit_code, 0) << abi.output;
  const std::string abi_reason = kTestPlugins +
                                 "/bad_abi/titan_optimizer_badabi.so: plugin "
                                 "built for titan plugin ABI 999, but this titan uses ABI " +
                                 std::to_string(TITAN_ABI_VERSION);
  EXPECT_THAT(abi.output,
              HasSubstr("[warning] [rank 0 step -] skipping plugin file " + abi_reason));
  EXPECT_THAT(abi.output, testing::ContainsRegex("optimizer +adamw"));  // the others load
  Result text = Titan("--list-plugins --plugin-dir " + kTestPlugins + "/not_a_library");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_THAT(text.output,
              HasSubstr("titan_optimizer_text.so: not a titan plugin: not a shared library"));
  Result entry = Titan("--list-plugins --plugin-dir " + kTestPlugins + "/no_entry");
  EXPECT_EQ(entry.exit_code, 0) << entry.output;
  EXPECT_THAT(entry.output,
              HasSubstr("titan_optimizer_noentry.so: not a titan plugin: no entry point"));
  // A recipe that does not use the bad file runs; one that asks for it names file and reason.
  Result unused = Titan("--recipe recipes/llama3_debug.toml --validate --plugin-dir " +
                        kTestPlugins + "/bad_abi");
  EXPECT_EQ(unused.exit_code, 0) << unused.output;
  Result asked = Titan(
      "--recipe recipes/llama3_debug.toml --validate --optimizer.name=badabi "
      "--plugin-dir " +
      kTestPlugins + "/bad_abi");
  EXPECT_EQ(asked.exit_code, 2) << asked.output;
  EXPECT_THAT(asked.output, HasSubstr("optimizer.name: the optimizer plugin 'badabi' cannot be "
                                      "used: " +
                                      abi_reason));
  Result twice = Titan("--list-plugins --plugin-dir " + kTestPlugins + "/good --plugin-dir " +
                       kTestPlugins + "/duplicate");
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_THAT(twice.output, HasSubstr("two optimizer plugins are named 'testgood': " +
                                      kTestPlugins + "/good/titan_optimizer_testgood.so and " +
                                      kTestPlugins + "/duplicate/titan_optimizer_testgood.so"));
  Result no_dir = Titan("--list-plugins --plugin-dir /no/such/dir");
  EXPECT_EQ(no_dir.exit_code, 2);
  EXPECT_THAT(no_dir.output, HasSubstr("--plugin-dir /no/such/dir: no such directory"));
}

TEST(TitanRun, FaultyPluginsAreNamedInsteadOfCrashing) {
  const std::string faulty = kTestPlugins + "/faulty";
  for (const char* name : {"nullfactory", "throwingfactory", "throwingconfigure"}) {
    Result r = Titan(absl::StrCat("--recipe recipes/llama3_debug.toml --validate --plugin-dir ",
                                  faulty, " --optimizer.name=", name));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat("optimizer plugin '", name, "' (", faulty,
                                                 "/titan_optimizer_", name, ".so): ")));
  }
  // An exception from a plugin's Step during training ends the run naming the plugin and file.
  const std::string dump =
      (std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_test_step_", getpid()))
          .string();
  Result step = Titan(
      "--recipe recipes/llama3_debug.toml --model.tokenizer_path=byte --training.steps=1 "
      "--training.seq_len=16 --training.local_batch_size=2 --validation.freq=0 "
      "--generate.max_new_tokens=0 --optimizer.name=throwingstep --plugin-dir " +
      faulty + " --job.dump_folder=" + dump);
  std::filesystem::remove_all(dump);
  EXPECT_EQ(step.exit_code, 1) << step.output;
  EXPECT_THAT(step.output, HasSubstr("optimizer plugin 'throwingstep' (" + faulty +
                                     "/titan_optimizer_throwingstep.so): Step threw a C++ "
                                     "exception: boom from plugin Step"));
  // --recipe-reference creates every plugin it lists: a faulty one is named, not fatal.
  Result reference = Titan("--recipe-reference --plugin-dir " + faulty);
  EXPECT_EQ(reference.exit_code, 0) << reference.output;
  EXPECT_THAT(reference.output, HasSubstr("With `name = \"nullfactory\"`: unavailable ("));
}

// titan-run running in the background, its output going to a file, so that a test can signal
// it once the output shows that training has reached a given point.
class Background {
 public:
  Background(const std::string& args, const std::filesystem::path& log) : log_(log) {
    const std::string command =
        absl::StrCat("cd ", TITAN_SOURCE_DIR, " && exec env -u TITAN_PLUGIN_PATH ", TITAN_RUN, " ",
                     args, " > ", log.string(), " 2>&1");
    pid_ = fork();
    if (pid_ == 0) {
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0 && exit_code_ < 0) kill(pid_, SIGKILL), Wait();
  }

  // The first match of `pattern` in the output, waiting for it while the process runs (the
  // limit only guards against a hang; nothing depends on speed). Empty if it never came.
  std::smatch WaitFor(const std::string& pattern) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    std::smatch match;
    while (std::chrono::steady_clock::now() < give_up) {
      output_ = Output();
      if (std::regex_search(output_, match, std::regex(pattern))) return match;
      if (waitpid(pid_, nullptr, WNOHANG) != 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "titan-run never printed " << pattern << ":\n" << Output();
    return match;
  }
  void Signal(int signal) { kill(pid_, signal); }
  pid_t pid() const { return pid_; }  // titan-run's own: the shell execs it
  // The exit code, 128 + N when killed by signal N.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }
  std::string Output() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
  int exit_code_ = -1;
  std::string output_;  // WaitFor's matches point into it
};

std::string SignalRun(const std::filesystem::path& dump, bool checkpoint) {
  return absl::StrCat(
      "--recipe recipes/llama3_debug.toml --model.tokenizer_path=byte --training.steps=100000 "
      "--training.seq_len=16 --training.local_batch_size=2 --validation.freq=0 "
      "--generate.max_new_tokens=4 --metrics.log_freq=1 --checkpoint.interval=100000 "
      "--checkpoint.enable=",
      checkpoint ? "true" : "false", " --job.dump_folder=", dump.string());
}

TEST(TitanRun, FirstSigtermFinishesTheStepSavesACheckpointAndExits3) {
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_sigterm_", getpid());
  std::filesystem::remove_all(dump);
  std::filesystem::create_directories(dump);
  Background run(SignalRun(dump, true), dump / "log.txt");
  run.WaitFor("step [0-9]+\\] loss");
  run.Signal(SIGTERM);
  ASSERT_EQ(run.Wait(), 3) << run.Output();
  std::string output = run.Output();
  std::smatch stop;
  ASSERT_TRUE(std::regex_search(output, stop,
                                std::regex("stopped by SIGTERM after step ([0-9]+) of 100000; its "
                                           "checkpoint is saved: run the same command to resume")))
      << output;
  const std::string step = stop[1];
  EXPECT_TRUE(std::filesystem::exists(dump / "checkpoint" / ("step-" + step) / "metadata.json"))
      << output;
  EXPECT_THAT(output, Not(HasSubstr("[generate] sample:")));
  // The run resumes from the step it stopped at and trains the next one.
  const int64_t next = std::stoll(step) + 1;
  Result resumed = Titan(absl::StrCat(SignalRun(dump, true), " --training.steps=", next));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("(step " + step));
  EXPECT_THAT(resumed.output, HasSubstr(absl::StrCat("step ", next, "] loss")));
  std::filesystem::remove_all(dump);
}

TEST(TitanRun, FirstSigintWithoutCheckpointsSavesTheModelAndExits3) {
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_sigint_", getpid());
  std::filesystem::remove_all(dump);
  std::filesystem::create_directories(dump);
  Background run(SignalRun(dump, false), dump / "log.txt");
  run.WaitFor("step [0-9]+\\] loss");
  run.Signal(SIGINT);
  ASSERT_EQ(run.Wait(), 3) << run.Output();
  EXPECT_THAT(run.Output(), testing::ContainsRegex("stopped by SIGINT after step [0-9]+ of 100000; "
                                                   "the model is saved to " +
                                                   dump.string() + "/model.arena"));
  EXPECT_TRUE(std::filesystem::exists(dump / "model.arena"));
  std::filesystem::remove_all(dump);
}

TEST(TitanRun, SecondSignalExitsAtOnceWithoutSaving) {
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_sig2_", getpid());
  std::filesystem::remove_all(dump);
  std::filesystem::create_directories(dump);
  Background run(SignalRun(dump, false), dump / "log.txt");
  run.WaitFor("step [0-9]+\\] loss");
  // Stopped, the process holds both signals pending and takes them one after the other on
  // SIGCONT, with no step in between.
  run.Signal(SIGSTOP);
  run.Signal(SIGINT);
  run.Signal(SIGTERM);
  run.Signal(SIGCONT);
  const int code = run.Wait();
  EXPECT_TRUE(code == 128 + SIGINT || code == 128 + SIGTERM) << code << "\n" << run.Output();
  EXPECT_THAT(run.Output(), HasSubstr("second stop signal: exiting at once, without saving"));
  EXPECT_FALSE(std::filesystem::exists(dump / "model.arena"));
  std::filesystem::remove_all(dump);
}

// A format that holds models only cannot save what resuming needs: a stopped run saves the
// model to model.arena instead, as without checkpoints, and still exits 3.
TEST(TitanRun, FirstSigtermWithAModelOnlyFormatSavesTheModelAndExits3) {
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_sigterm_st_", getpid());
  std::filesystem::remove_all(dump);
  std::filesystem::create_directories(dump);
  Background run(SignalRun(dump, true) +
                     " --checkpoint.format=safetensors --checkpoint.last_save_model_only=true",
                 dump / "log.txt");
  run.WaitFor("step [0-9]+\\] loss");
  run.Signal(SIGTERM);
  ASSERT_EQ(run.Wait(), 3) << run.Output();
  EXPECT_THAT(run.Output(),
              testing::ContainsRegex("stopped by SIGTERM after step [0-9]+ of 100000; the model is "
                                     "saved to " +
                                     dump.string() +
                                     "/model.arena \\(checkpoint.format = \"safetensors\" holds "
                                     "the model only: no resuming\\)"));
  EXPECT_TRUE(std::filesystem::exists(dump / "model.arena"));
  std::filesystem::remove_all(dump);
}

// SIGUSR1 asks for the flight record, before the rank has joined its job as after, and never
// ends the run: a single rank writes one too (with no collectives).
TEST(TitanRun, Sigusr1WritesTheFlightRecordAndTheRunGoesOn) {
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_sigusr1_", getpid());
  std::filesystem::remove_all(dump);
  std::filesystem::create_directories(dump);
  Background run(SignalRun(dump, false), dump / "log.txt");
  run.WaitFor("recipe is valid; mesh");  // before the world is formed
  run.Signal(SIGUSR1);
  // Served once the rank has joined, or after the first step, whichever comes first.
  const std::string served =
      "SIGUSR1: flight record of rank 0 \\((asked before this rank joined the job|after step "
      "[0-9]+)\\) in " +
      dump.string() + "/flight_recorder/flight_recorder_rank0.json";
  run.WaitFor(served);
  run.WaitFor("step [0-9]+\\] loss");
  run.Signal(SIGUSR1);
  run.WaitFor(served + "[\\s\\S]*" + served);  // a second record
  const nlohmann::json record =
      nlohmann::json::parse(std::ifstream(dump / "flight_recorder" / "flight_recorder_rank0.json"));
  EXPECT_THAT(record.at("reason").get<std::string>(), testing::StartsWith("SIGUSR1, after step "));
  EXPECT_EQ(record.at("rank"), 0);
  EXPECT_TRUE(record.at("collectives").is_array());
  run.Signal(SIGTERM);
  EXPECT_EQ(run.Wait(), 3) << run.Output();
  std::filesystem::remove_all(dump);
}

// A second run in a dump folder that a run still uses (a requeued job) is refused, naming the
// holder, before it writes anything there.
TEST(TitanRun, ASecondRunInTheSameDumpFolderIsRefusedNamingTheFirst) {
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_two_runs_", getpid());
  std::filesystem::remove_all(dump);
  std::filesystem::create_directories(dump);
  Background first(SignalRun(dump, true), dump / "log.txt");
  first.WaitFor("step [0-9]+\\] loss");
  Result second = Titan(SignalRun(dump, true) + " --training.steps=2");
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_THAT(second.output, HasSubstr(absl::StrCat("job.dump_folder = \"", dump.string(),
                                                    "\" is in use by another run: pid ",
                                                    first.pid(), " on host ")));
  EXPECT_THAT(second.output, Not(HasSubstr("] loss")));
  first.Signal(SIGTERM);
  EXPECT_EQ(first.Wait(), 3) << first.Output();
  std::filesystem::remove_all(dump);
}

TEST(TitanRun, AnUnknownBf16GemmSettingIsRefusedNamingIt) {
  Result r = Titan("--recipe recipes/llama3_debug.toml --validate", "TITAN_BF16_GEMM=bogus");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("environment variable TITAN_BF16_GEMM=bogus: expected "
                                  "\"emulate\""));
}

TEST(TitanRun, FindsPluginsOnTitanPluginPath) {
  Result r = Titan("--list-plugins", "TITAN_PLUGIN_PATH=" + kTestPlugins + "/good");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(kTestPlugins + "/good/titan_optimizer_testgood.so"));
}

TEST(TitanRun, LogLevelSelectsWhatIsShown) {
  Result debug = Titan("--recipe recipes/llama3_debug.toml --validate --log-level=debug");
  ASSERT_EQ(debug.exit_code, 0) << debug.output;
  EXPECT_THAT(debug.output, HasSubstr("[debug] [rank 0 step -] plugin directory "));
  Result quiet = Titan("--recipe recipes/llama3_debug.toml --validate --log-level=warn");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_THAT(quiet.output, Not(HasSubstr("recipe is valid")));
  Result bad = Titan("--list-plugins --log-level=loud");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("--log-level loud: expected one of trace, debug, info"));
}

TEST(TitanRun, ColourOnlyOnATerminal) {
  Result piped = Titan("--recipe recipes/llama3_debug.toml --validate");
  EXPECT_THAT(piped.output, Not(HasSubstr("\x1b[")));
  // script(1) gives the command a pseudo-terminal.
  Result tty =
      Shell(absl::StrCat("cd ", TITAN_SOURCE_DIR, " && TERM=xterm script -qec '", TITAN_RUN,
                         " --recipe recipes/llama3_debug.toml --validate' /dev/null"));
  ASSERT_EQ(tty.exit_code, 0) << tty.output;
  EXPECT_THAT(tty.output, HasSubstr("\x1b["));
}

TEST(TitanRun, UsageMistakesAreExplained) {
  Result none = Titan("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.output,
              HasSubstr("nothing to do: give --recipe FILE, --list-plugins or --recipe-reference"));
  Result typo = Titan("--recipes recipes/llama3_debug.toml");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.output, HasSubstr("unknown argument '--recipes'; did you mean '--recipe'?"));
  Result help = Titan("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.output, HasSubstr("--section.key=value"));
  Result version = Titan("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.output, HasSubstr("(plugin ABI " + std::to_string(TITAN_ABI_VERSION) + ")"));
}

}  // namespace

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(TitanRun, CudaWithoutAGpuIsRefusedBeforeTraining) {
  if (Titan("--list-plugins").output.find("device     cuda") == std::string::npos) {
    GTEST_SKIP() << "this build has no cuda device plugin (it was configured without CUDA)";
  }
  Result r = Titan("--recipe recipes/llama3_debug.toml --job.device=cuda --validate");
  if (r.exit_code == 0) GTEST_SKIP() << "this machine has a CUDA device; this checks its absence";
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("job.device = \"cuda\": local rank 0 needs device 0, but this "
                                  "machine has 0 cuda device(s)"));
  EXPECT_THAT(r.output, Not(HasSubstr("recipe is valid")));
}

// srun without a PMI that MPI speaks: each task's MPI world is itself alone.
TEST(TitanRun, SrunWithoutPmiIsNamedWhenTheRanksJoin) {
  Result r = Titan(
      "--recipe recipes/llama3_debug.toml --training.steps=1 --job.dump_folder=/tmp/titan_srun_"
      "without_pmi",
      "SLURM_STEP_ID=0 SLURM_NTASKS=2 SLURM_PROCID=1 SLURM_LOCALID=1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("srun started 2 ranks, this process as rank 1 (SLURM_NTASKS, "
                                  "SLURM_PROCID, SLURM_LOCALID), but the comm plugin's world "
                                  "holds 1 rank(s), this process being rank 0: MPI was not "
                                  "started through a PMI that srun provides; launch with "
                                  "`srun --mpi=pmix`"));
}

// What srun sets for task 2 of a 4-task job step; titan-run takes its rank, the world and its
// local rank (which picks its device) from them.
const char kSrunTask2Of4[] =
    "SLURM_JOB_ID=77 SLURM_STEP_ID=0 SLURM_NTASKS=4 SLURM_PROCID=2 SLURM_LOCALID=2 SLURM_NODEID=0";

TEST(TitanRun, SrunPlacesTheRankWorldAndLocalRank) {
  Result r = Titan("--recipe recipes/llama3_debug.toml --validate", kSrunTask2Of4);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[rank 2 step -] [job] started by srun as rank 2 of 4, local "
                                  "rank 2 (SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID)"));
  EXPECT_THAT(r.output, HasSubstr("recipe is valid for 4 rank(s)"));
  EXPECT_THAT(r.output, Not(HasSubstr("[rank 0 step -]")));
}

TEST(TitanRun, ABatchScriptOutsideAJobStepIsOneProcess) {
  Result r = Titan("--recipe recipes/llama3_debug.toml --validate",
                   "SLURM_JOB_ID=77 SLURM_NTASKS=4 SLURM_PROCID=0 SLURM_LOCALID=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("not started by a launcher: checking the recipe for 1 rank(s)"));
  EXPECT_THAT(r.output, Not(HasSubstr("started by srun")));
}

TEST(TitanRun, ASlurmVariableThatIsNoRankIsRefused) {
  Result r = Titan("--recipe recipes/llama3_debug.toml --validate",
                   "SLURM_STEP_ID=0 SLURM_NTASKS=4 SLURM_PROCID=4 SLURM_LOCALID=0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("SLURM_PROCID = \"4\": expected this process's rank, a whole "
                        "number from 0 to 3 (set by srun, which started this titan-run)"));
}

TEST(TitanRun, SrunsLocalRankPicksTheGpu) {
  if (Titan("--list-plugins").output.find("device     cuda") == std::string::npos) {
    GTEST_SKIP() << "this build has no cuda device plugin (it was configured without CUDA)";
  }
  Result r = Titan("--recipe recipes/llama3_debug.toml --job.device=cuda --validate",
                   "SLURM_STEP_ID=0 SLURM_NTASKS=16 SLURM_PROCID=11 SLURM_LOCALID=3");
  if (r.exit_code == 0) GTEST_SKIP() << "this machine has 4 or more GPUs; this checks fewer";
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output,
              testing::ContainsRegex("job.device = \"cuda\": local rank 3 needs device 3, but this "
                                     "machine has [0-3] cuda device\\(s\\)"));
}

TEST(TitanRun, TheLogNamesTheKernelsAndTheMatmulPrecision) {
  const std::string dump =
      (std::filesystem::temp_directory_path() / absl::StrCat("titan_cli_test_bf16_", getpid()))
          .string();
  const std::string tiny =
      "--recipe recipes/llama3_debug.toml --model.tokenizer_path=byte --training.steps=1 "
      "--training.seq_len=16 --training.local_batch_size=2 --validation.freq=0 "
      "--generate.max_new_tokens=0 --job.dump_folder=" +
      dump;
  Result bf16 = Titan(tiny + " --training.mixed_precision_param=bfloat16");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  EXPECT_THAT(
      bf16.output,
      testing::ContainsRegex(
          "\\[device\\] cpu: f32 GEMM by OpenBLAS [0-9.]+ [A-Za-z0-9_]+ kernels \\([^)]*\\); "
          "bf16 GEMM (by oneDNN|emulated)[^;]*; attention in the matmuls' precision [^;]*; "
          "vector kernels for [A-Z0-9_]+ \\(Highway\\); matmuls in bf16 with f32 "
          "accumulation"));
  Result f32 = Titan(tiny);
  ASSERT_EQ(f32.exit_code, 0) << f32.output;
  EXPECT_THAT(f32.output, testing::ContainsRegex("attention in the matmuls' precision [^;]*; "
                                                 "vector kernels for [^;]*; matmuls in f32"));
  std::filesystem::remove_all(dump);
}

// docs/reference.md is the user's reference of titan-run: it must hold every line of the recipe
// reference the current build generates (a build without CUDA generates a subset of a build
// with it) and every flag of --help.
const char kReferencePage[] = "/docs/reference.md";

TEST(Reference, DocumentsEveryRecipeKeyOfTheBuild) {
  std::string reference_page = ReadFile(std::string(TITAN_SOURCE_DIR) + kReferencePage);
  size_t begin = reference_page.find("<!-- recipe-reference:");
  size_t end = reference_page.find("<!-- end recipe-reference -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::string documented = reference_page.substr(begin, end - begin);
  Result reference = Titan("--recipe-reference");
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  EXPECT_THAT(reference.output, HasSubstr("| `steps` | integer >= 1 | `10000` |"));
  std::istringstream lines(reference.output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line == "| key | type | default | meaning |" ||
        line == "|---|---|---|---|") {
      continue;
    }
    EXPECT_NE(documented.find(line + "\n"), std::string::npos)
        << line
        << "\ndocs/reference.md is missing this line of `titan-run --recipe-reference`; run "
           "tools/update-recipe-reference";
  }
}

// Every flag a tool's --help names (a word starting with --) is documented on its page, in
// backquotes as the page's flag tables write it; returns how many flags were checked.
int ExpectEveryFlagDocumented(const std::string& help, const std::string& page_path) {
  std::string page = ReadFile(std::string(TITAN_SOURCE_DIR) + page_path);
  EXPECT_FALSE(page.empty()) << page_path;
  std::istringstream words(help);
  std::string word;
  int flags = 0;
  while (words >> word) {
    while (!word.empty() && std::string(",.:;)").find(word.back()) != std::string::npos)
      word.pop_back();
    if (word.rfind("--", 0) != 0 || word == "--section.key=value") continue;
    ++flags;
    EXPECT_NE(page.find("`" + word), std::string::npos)
        << word << " is not documented in " << page_path;
  }
  return flags;
}

TEST(Reference, DocumentsEveryFlag) {
  EXPECT_GE(ExpectEveryFlagDocumented(Titan("--help").output, kReferencePage), 9);
}

TEST(Reference, DocumentsEveryFlagOfTitanTokenizeAndTitanGenerate) {
  EXPECT_GE(ExpectEveryFlagDocumented(Shell(absl::StrCat(TITAN_TOKENIZE, " --help")).output,
                                      "/docs/data.md"),
            8);
  EXPECT_GE(ExpectEveryFlagDocumented(Shell(absl::StrCat(TITAN_GENERATE, " --help")).output,
                                      "/docs/training.md"),
            10);
}

}  // namespace
