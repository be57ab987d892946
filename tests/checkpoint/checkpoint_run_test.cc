// Checkpoints through titan-run on a tiny model (byte tokenizer, 2 x 16 tokens a step): what a
// run does with an incomplete newest step folder, model-only and failed final saves, Hugging
// Face imports whose config.json differs from the flavor, and the GQA and tied flavors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/support/shell.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Json = nlohmann::json;

using Result = titan::testing::ShellResult;

class CheckpointRun : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           absl::StrCat("titan_checkpoint_run_", getpid(), "_",
                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // titan-run on the debug recipe into dir_/`dump`, checkpointing on, with `args` after.
  // `launcher` goes before it, e.g. "prlimit --fsize=N".
  Result Run(const std::string& dump, int steps, const std::string& args,
             const std::string& launcher = "") {
    const std::string command = absl::StrCat(
        "cd ", TITAN_SOURCE_DIR, " && ", launcher, " env -u TITAN_PLUGIN_PATH OMP_NUM_THREADS=1 ",
        TITAN_RUN,
        " --recipe recipes/llama3_debug.toml --model.tokenizer_path=byte --training.seq_len=16 ",
        "--training.local_batch_size=2 --validation.freq=0 --generate.max_new_tokens=0 ",
        "--checkpoint.enable=true --training.steps=", steps,
        " --job.dump_folder=", (dir_ / dump).string(), " ", args);
    return titan::testing::RunShell(command);
  }

  static Json ReadJson(const fs::path& path) { return Json::parse(std::ifstream(path)); }
  // The loss of step 1 as logged in dir_/`dump`/metrics.jsonl.
  double FirstLoss(const std::string& dump) const {
    std::ifstream metrics(dir_ / dump / "metrics.jsonl");
    std::string line;
    std::getline(metrics, line);
    const Json first = Json::parse(line);
    EXPECT_EQ(first["step"], 1) << line;
    return first["loss"].get<double>();
  }
  static void WriteJson(const fs::path& path, const Json& json) {
    std::ofstream(path) << json.dump(2);
  }

  fs::path dir_;
};

TEST_F(CheckpointRun, IncompleteNewestStepFolderIsReportedAndKept) {
  const std::string dcp = "--checkpoint.interval=1 --checkpoint.last_save_model_only=false";
  Result first = Run("run", 2, dcp);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // A newer step whose index is gone (a copy cut short, a disk that lost it).
  const fs::path steps = dir_ / "run" / "checkpoint";
  fs::copy(steps / "step-2", steps / "step-3");
  fs::remove(steps / "step-3" / "metadata.json");
  const auto shard_size = fs::file_size(steps / "step-3" / "rank-0.bin");

  Result resumed = Run("run", 4, dcp);
  EXPECT_EQ(resumed.exit_code, 1) << resumed.output;  // a corrupt checkpoint's status
  EXPECT_THAT(resumed.output,
              HasSubstr((steps / "step-3").string() + " is not a complete checkpoint ("));
  EXPECT_THAT(resumed.output, HasSubstr("metadata.json is missing"));
  EXPECT_THAT(resumed.output, HasSubstr("and it is newer than the latest complete one, " +
                                        (steps / "step-2").string()));
  EXPECT_THAT(resumed.output, HasSubstr("to resume from step 2, or set checkpoint.load_step"));
  EXPECT_THAT(resumed.output, Not(HasSubstr("step 3] loss")));
  EXPECT_EQ(fs::file_size(steps / "step-3" / "rank-0.bin"), shard_size) << "left as it was";
  EXPECT_FALSE(fs::exists(steps / "step-4"));

  // An empty folder is no checkpoint either; an older incomplete one is only warned about.
  fs::remove_all(steps / "step-3");
  fs::create_directory(steps / "step-3");
  Result empty = Run("run", 4, dcp);
  EXPECT_EQ(empty.exit_code, 1) << empty.output;
  EXPECT_THAT(empty.output, HasSubstr((steps / "step-3").string() + " is not a complete"));
  fs::rename(steps / "step-3", steps / "step-0");
  Result older = Run("run", 3, dcp);
  ASSERT_EQ(older.exit_code, 0) << older.output;
  EXPECT_THAT(older.output, HasSubstr("ignoring " + (steps / "step-0").string() + ", older than " +
                                      (steps / "step-2").string()));
  EXPECT_THAT(older.output, HasSubstr("step 3] loss"));
}

// keep_latest_k renames a checkpoint before removing it, so a kill mid-removal leaves a
// step-<N>.pruned folder, which the next prune removes; a step folder whose rank file is gone
// (metadata.json alone) is not complete, so neither resumed from nor counted among the kept.
TEST_F(CheckpointRun, PruningIsCrashSafeAndAFolderMissingARankFileIsIncomplete) {
  const std::string dcp =
      "--checkpoint.interval=1 --checkpoint.last_save_model_only=false "
      "--checkpoint.keep_latest_k=2";
  auto listing = [](const fs::path& folder) {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder))
      names.insert(entry.path().filename().string());
    return names;
  };
  Result first = Run("run", 3, dcp);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path steps = dir_ / "run" / "checkpoint";
  EXPECT_EQ(listing(steps), (std::set<std::string>{"step-2", "step-3"}));
  // What a prune killed midway leaves, and a newest step whose rank file is gone.
  fs::copy(steps / "step-2", steps / "step-1.pruned");
  fs::remove(steps / "step-1.pruned" / "rank-0.bin");
  fs::copy(steps / "step-3", steps / "step-4");
  fs::remove(steps / "step-4" / "rank-0.bin");

  Result refused = Run("run", 5, dcp);
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output,
              HasSubstr((steps / "step-4").string() + " is not a complete checkpoint (" +
                        (steps / "step-4" / "rank-0.bin").string() + " is missing"));
  EXPECT_THAT(refused.output, Not(HasSubstr("step 5] loss")));

  fs::remove_all(steps / "step-4");
  Result resumed = Run("run", 5, dcp);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("loaded " + (steps / "step-3").string() + " (step 3"));
  EXPECT_EQ(listing(steps), (std::set<std::string>{"step-4", "step-5"}));
}

// Whatever is damaged (a shard's bytes, metadata.json, a missing shard, the folder load_step
// names), a corrupt checkpoint exits with 1, as the README says; a load_step with no folder
// at all is the recipe's error (2).
TEST_F(CheckpointRun, EveryCorruptCheckpointExitsWithOne) {
  const std::string dcp = "--checkpoint.interval=1 --checkpoint.last_save_model_only=false";
  ASSERT_EQ(Run("run", 2, dcp).exit_code, 0);
  const fs::path steps = dir_ / "run" / "checkpoint";
  const fs::path saved = dir_ / "saved";
  fs::copy(steps, saved, fs::copy_options::recursive);
  auto restore = [&] {
    fs::remove_all(steps);
    fs::copy(saved, steps, fs::copy_options::recursive);
  };
  {
    std::fstream shard(steps / "step-2" / "rank-0.bin",
                       std::ios::in | std::ios::out | std::ios::binary);
    shard.seekp(40);
    shard.put('\x5a');
  }
  Result bad_shard = Run("run", 3, dcp);
  EXPECT_EQ(bad_shard.exit_code, 1) << bad_shard.output;
  EXPECT_THAT(bad_shard.output, HasSubstr((steps / "step-2" / "rank-0.bin").string()));
  restore();
  std::ofstream(steps / "step-2" / "metadata.json") << "{\"format\": \"titan-dcp\", \"vers";
  Result bad_index = Run("run", 3, dcp);
  EXPECT_EQ(bad_index.exit_code, 1) << bad_index.output;
  EXPECT_THAT(bad_index.output, HasSubstr("malformed index"));
  restore();
  fs::remove(steps / "step-1" / "rank-0.bin");
  Result missing_shard = Run("run", 3, dcp + " --checkpoint.load_step=1");
  EXPECT_EQ(missing_shard.exit_code, 1) << missing_shard.output;
  EXPECT_THAT(missing_shard.output,
              HasSubstr("checkpoint.load_step = 1: " + steps.string() +
                        " holds no complete checkpoint of that step (it has: 2); " +
                        (steps / "step-1" / "rank-0.bin").string() + " is missing"));
  Result no_such_step = Run("run", 3, dcp + " --checkpoint.load_step=7");
  EXPECT_EQ(no_such_step.exit_code, 2) << no_such_step.output;
}

// A file that happens to be named like a step is no checkpoint, complete or not: the run
// resumes from the latest checkpoint folder and says what it ignored.
TEST_F(CheckpointRun, AFileNamedLikeAStepDoesNotBlockResuming) {
  const std::string dcp = "--checkpoint.interval=1 --checkpoint.last_save_model_only=false";
  ASSERT_EQ(Run("run", 2, dcp).exit_code, 0);
  const fs::path steps = dir_ / "run" / "checkpoint";
  std::ofstream(steps / "step-20") << "not a checkpoint\n";
  Result resumed = Run("run", 3, dcp);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("ignoring " + (steps / "step-20").string() +
                                        ": a file, not a checkpoint folder"));
  EXPECT_THAT(resumed.output, HasSubstr("loaded " + (steps / "step-2").string() + " (step 2"));
  EXPECT_THAT(resumed.output, HasSubstr("step 3] loss"));
  EXPECT_TRUE(fs::is_regular_file(steps / "step-20"));
}

TEST_F(CheckpointRun, SafetensorsModelOnlyFinalSaveHoldsTheModelAndResumes) {
  const std::string safetensors =
      "--checkpoint.format=safetensors --checkpoint.interval=100 "
      "--checkpoint.last_save_model_only=true";
  Result first = Run("run", 2, safetensors);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path step = dir_ / "run" / "checkpoint" / "step-2";
  EXPECT_TRUE(fs::exists(step / "model.safetensors"));
  const Json config = ReadJson(step / "config.json");
  EXPECT_EQ(config["bos_token_id"], 256);  // the byte tokenizer's
  EXPECT_EQ(config["eos_token_id"], 257);

  Result resumed = Run("run", 3, safetensors);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("loaded " + step.string() + " (step 2;"));
  EXPECT_THAT(resumed.output, HasSubstr("step 3] loss"));
  EXPECT_TRUE(fs::exists(dir_ / "run" / "checkpoint" / "step-3" / "model.safetensors"));
}

TEST_F(CheckpointRun, SafetensorsAskedForTrainingStateIsRefusedBeforeTraining) {
  Result interval = Run("interval", 3,
                        "--checkpoint.format=safetensors --checkpoint.interval=2 "
                        "--checkpoint.last_save_model_only=true");
  EXPECT_NE(interval.exit_code, 0) << interval.output;
  EXPECT_THAT(interval.output,
              HasSubstr("checkpoint.format = \"safetensors\" holds the model only, but "
                        "checkpoint.interval = 2 saves the training state at step 2 of 3: use "
                        "format = \"dcp\""));
  Result full = Run("full", 2,
                    "--checkpoint.format=safetensors --checkpoint.interval=100 "
                    "--checkpoint.last_save_model_only=false");
  EXPECT_NE(full.exit_code, 0) << full.output;
  EXPECT_THAT(full.output, HasSubstr("checkpoint.last_save_model_only = false saves the training "
                                     "state at the end"));
  EXPECT_THAT(full.output, Not(HasSubstr("step 1] loss")));
}

TEST_F(CheckpointRun, FailedFinalSaveStillWritesTheTrainedWeights) {
  // A full disk, as a file size limit: the full checkpoint (about 59 MB: model and optimizer
  // state) does not fit, model.arena (21.5 MB) does. SIGXFSZ ignored, a write fails with EFBIG.
  Result run = Run("run", 2, "--checkpoint.interval=100 --checkpoint.last_save_model_only=false",
                   "trap '' XFSZ; prlimit --fsize=40000000");
  EXPECT_NE(run.exit_code, 0) << run.output;
  const fs::path arena = dir_ / "run" / "model.arena";
  EXPECT_THAT(run.output, HasSubstr("[train] stopped after step 2: checkpoint: "));
  EXPECT_THAT(run.output, HasSubstr("the weights of step 2 are in " + arena.string()));
  EXPECT_TRUE(fs::exists(arena));
  EXPECT_GT(fs::file_size(arena), 5'000'000u);  // 5.4M f32 parameters' worth
}

// Issue #39: when model.arena does not fit either, both errors are logged, the checkpoint's first.
TEST_F(CheckpointRun, AFailedFinalSaveAndAFailedModelArenaAreBothLogged) {
  Result run = Run("run", 2, "--checkpoint.interval=100 --checkpoint.last_save_model_only=false",
                   "trap '' XFSZ; prlimit --fsize=10000000");
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_THAT(run.output, HasSubstr("[train] stopped after step 2: checkpoint: "));
  EXPECT_THAT(run.output, HasSubstr("writing the weights failed too"));
  EXPECT_THAT(run.output, HasSubstr((dir_ / "run" / "model.arena").string()));
}

// Folders the run writes to only later are checked at start: a file in the checkpoint folder's
// place, or in the profiler's, stops the run before its first step, naming the key.
TEST_F(CheckpointRun, UnwritableOutputFoldersAreFoundAtStart) {
  fs::create_directories(dir_ / "run");
  std::ofstream(dir_ / "run" / "checkpoint") << "in the way";
  Result checkpoint = Run("run", 2, "--checkpoint.interval=100");
  EXPECT_EQ(checkpoint.exit_code, 2) << checkpoint.output;
  EXPECT_THAT(checkpoint.output, HasSubstr("checkpoint.folder: cannot write in " +
                                           (dir_ / "run" / "checkpoint").string() + ": "));
  EXPECT_THAT(checkpoint.output, testing::Not(HasSubstr("step 1] loss")));

  std::ofstream(dir_ / "run" / "traces") << "in the way";
  Result traces = Run("run", 2,
                      "--checkpoint.enable=false --profiling.enable_profiling=true "
                      "--profiling.save_traces_folder=traces");
  EXPECT_EQ(traces.exit_code, 2) << traces.output;
  EXPECT_THAT(traces.output, HasSubstr("profiling.save_traces_folder: cannot write in " +
                                       (dir_ / "run" / "traces").string() + ": "));
  EXPECT_THAT(traces.output, testing::Not(HasSubstr("step 1] loss")));
}

TEST_F(CheckpointRun, ImportTakesNormEpsAndRopeFromConfigJsonAndRefusesAnotherShape) {
  Result exported =
      Run("hf", 1, "--checkpoint.format=safetensors --checkpoint.last_save_model_only=true");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const fs::path hf = dir_ / "hf" / "checkpoint" / "step-1";
  const std::string import =
      absl::StrCat("--checkpoint.initial_load_path=", hf.string(),
                   " --checkpoint.last_save_model_only=false --checkpoint.interval=100");
  Result as_exported = Run("as_exported", 1, import);
  ASSERT_EQ(as_exported.exit_code, 0) << as_exported.output;
  EXPECT_THAT(as_exported.output, Not(HasSubstr("was trained with")));

  Json config = ReadJson(hf / "config.json");
  config["rope_theta"] = 10000.0;  // Llama 2's
  config["rms_norm_eps"] = 1e-6;
  config["rope_scaling"] = nullptr;
  config["max_position_embeddings"] = 8192;  // more than the run's seq_len of 16
  config["attention_dropout"] = 0.1;
  WriteJson(hf / "config.json", config);
  Result run = Run("run", 1, import);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The same weights and batch: only the norm and rotary settings can change the loss.
  EXPECT_NE(FirstLoss("run"), FirstLoss("as_exported"));
  EXPECT_THAT(run.output,
              HasSubstr(hf.string() + " was trained with norm_eps = 1e-06 (the flavor's: 1e-05), "
                                      "rope_theta = 10000 (the flavor's: 500000), rope_scaled = "
                                      "false (the flavor's: true): the run takes these from the "
                                      "checkpoint, not from model.flavor = \"debugmodel\""));
  // The model trained with them, and its checkpoints say so.
  const Json saved = ReadJson(dir_ / "run" / "checkpoint" / "step-1" / "metadata.json");
  EXPECT_EQ(saved["metadata"]["model.rope_theta"], "10000");
  EXPECT_EQ(saved["metadata"]["model.norm_eps"], "1e-06");
  EXPECT_EQ(saved["metadata"]["model.rope_scaled"], "false");
  // Issue #39: the imported context is kept (an export's max_position_embeddings stays 8192, not
  // the run's seq_len), and the dropout titan does not apply is named.
  EXPECT_EQ(saved["metadata"]["model.max_seq_len"], "8192");
  EXPECT_THAT(run.output, HasSubstr(hf.string() + " asks for attention_dropout = 0.1, but titan "
                                                  "trains without dropout: the run ignores it"));

  config["num_attention_heads"] = 8;  // the same tensors, cut into other heads
  config["num_key_value_heads"] = 8;
  config["head_dim"] = 32;
  WriteJson(hf / "config.json", config);
  Result refused = Run("refused", 1, import);
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_THAT(refused.output,
              HasSubstr(hf.string() + " holds another model: n_heads = 8, but model.flavor = "
                                      "\"debugmodel\" has 16; n_kv_heads = 8, but "));
  // --validate reads what the checkpoint says it holds and refuses the same (issue #39).
  Result validated = Run("validated", 1, import + " --validate");
  EXPECT_EQ(validated.exit_code, 2) << validated.output;
  EXPECT_THAT(validated.output,
              HasSubstr(hf.string() + " holds another model: n_heads = 8, but model.flavor = "
                                      "\"debugmodel\" has 16; n_kv_heads = 8, but "));

  // A folder no plugin reads says why each refused it.
  fs::remove(hf / "model.safetensors");
  Result unreadable = Run("unreadable", 1, import);
  EXPECT_NE(unreadable.exit_code, 0) << unreadable.output;
  EXPECT_THAT(unreadable.output, HasSubstr("checkpoint.initial_load_path = " + hf.string() +
                                           ": no checkpoint plugin reads it ("));
  EXPECT_THAT(unreadable.output,
              HasSubstr("safetensors: " + hf.string() + ": expected model.safetensors or "));
}

// The small GQA and tied flavors train, export to Hugging Face's layout and import again.
class FlavorRoundTrip : public CheckpointRun, public testing::WithParamInterface<const char*> {};

TEST_P(FlavorRoundTrip, TrainsExportsAndImports) {
  const std::string flavor = absl::StrCat("--model.flavor=", GetParam());
  Result exported = Run("hf", 1,
                        flavor +
                            " --checkpoint.format=safetensors "
                            "--checkpoint.last_save_model_only=true");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const fs::path hf = dir_ / "hf" / "checkpoint" / "step-1";
  const Json config = ReadJson(hf / "config.json");
  const bool gqa = std::string(GetParam()) == "debugmodel_gqa";
  EXPECT_EQ(config["num_attention_heads"], 16);
  EXPECT_EQ(config["num_key_value_heads"], gqa ? 4 : 16);
  EXPECT_EQ(config["tie_word_embeddings"], !gqa);

  Result imported = Run("run", 1,
                        absl::StrCat(flavor, " --checkpoint.initial_load_path=", hf.string(),
                                     " --checkpoint.interval=100"));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_THAT(imported.output, HasSubstr("loaded " + hf.string() + " (step 0;"));
  EXPECT_THAT(imported.output, HasSubstr("llama3 " + std::string(GetParam())));
}

INSTANTIATE_TEST_SUITE_P(SmallFlavors, FlavorRoundTrip,
                         testing::Values("debugmodel_gqa", "debugmodel_tied"));

// deepseek_v3's debug flavor trains a step, exports in transformers' DeepSeek-V3 layout (the
// experts' bias trained off zero, as e_score_correction_bias) and imports again.
TEST_F(CheckpointRun, DeepseekV3TrainsExportsAndImports) {
  const std::string model = "--model.name=deepseek_v3 --model.flavor=debugmodel";
  Result exported = Run("hf", 1,
                        model +
                            " --checkpoint.format=safetensors "
                            "--checkpoint.last_save_model_only=true");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const fs::path hf = dir_ / "hf" / "checkpoint" / "step-1";
  const Json config = ReadJson(hf / "config.json");
  EXPECT_EQ(config["model_type"], "deepseek_v3");
  EXPECT_EQ(config["q_lora_rank"], 128);
  EXPECT_EQ(config["rope_interleave"], true);
  std::ifstream file(hf / "model.safetensors", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_THAT(bytes, HasSubstr("model.layers.1.mlp.gate.e_score_correction_bias"));
  EXPECT_THAT(bytes, HasSubstr("model.layers.5.mlp.shared_experts.up_proj.weight"));

  Result imported = Run("run", 1,
                        absl::StrCat(model, " --checkpoint.initial_load_path=", hf.string(),
                                     " --checkpoint.interval=100"));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_THAT(imported.output, HasSubstr("loaded " + hf.string() + " (step 0;"));
  EXPECT_THAT(imported.output, HasSubstr("deepseek_v3 debugmodel"));
}

}  // namespace
