// titan-checkpoint as a user runs it: a separate process, its exit code and what it prints,
// on a checkpoint the safetensors plugin wrote.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/single_process_comm.h"
#include "tests/checkpoint/model_checkpoint.h"
#include "titan/float16.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

Result Tool(const std::string& args) {
  Result result;
  FILE* pipe = popen(
      absl::StrCat("env -u TITAN_PLUGIN_PATH ", TITAN_CHECKPOINT, " ", args, " 2>&1").c_str(), "r");
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class CheckpointCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(testing::TempDir()) /
           absl::StrCat("titan_checkpoint_cli_", getpid(), "_",
                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    export_ = dir_ / "export";
    registry_ = std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value();
    plugin_ = std::move(registry_->Create<CheckpointPlugin>("safetensors")).value();
    model_ = checkpoint_testing::SmallModel(config_);
    CheckpointMetadata metadata = checkpoint_testing::ModelMetadata(config_);
    metadata["train.step"] = "120";
    ASSERT_TRUE(
        plugin_->Save(export_.string(), checkpoint_testing::ModelPieces(*model_), metadata, comm_)
            .ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The parameters the folder holds, loaded into a fresh model.
  std::unique_ptr<DecoderModel> Loaded(const fs::path& folder) {
    auto model = checkpoint_testing::SmallModel(config_, 11);
    std::vector<CheckpointPiece> pieces = checkpoint_testing::ModelPieces(*model);
    absl::Status status = plugin_->Load(folder.string(), pieces, comm_);
    EXPECT_TRUE(status.ok()) << status;
    return model;
  }

  fs::path dir_;
  fs::path export_;
  LlamaConfig config_ = checkpoint_testing::SmallConfig();
  std::unique_ptr<PluginRegistry> registry_;
  std::unique_ptr<CheckpointPlugin> plugin_;
  std::unique_ptr<DecoderModel> model_;
  SingleProcessCommunicator comm_;
};

TEST_F(CheckpointCliTest, ListsStepTensorsTotalsAndMetadata) {
  for (const std::string& format : {std::string(), std::string(" --format safetensors")}) {
    Result r = Tool("list " + export_.string() + format);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr(export_.string() + ": safetensors checkpoint, step 120\n"));
    EXPECT_THAT(r.output, ContainsRegex("tensor +shape +dtype +size\n"));
    EXPECT_THAT(
        r.output,
        ContainsRegex("\nmodel/layers.0.attention.wq.weight +\\[64, 64\\] +f32 +16.0 KiB\n"));
    EXPECT_THAT(r.output, ContainsRegex("\nmodel/norm.weight +\\[64\\] +f32 +256 B\n"));
    const int64_t values = config_.ParameterCount();
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat("\n21 tensors, ", values, " values, ")));
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat(" (", values * 4, " bytes)\n")));
    EXPECT_THAT(r.output, HasSubstr("metadata:\n  model."));
    EXPECT_THAT(r.output, HasSubstr("\n  model.dim = 64\n"));
  }
}

TEST_F(CheckpointCliTest, ConvertsSafetensorsToSafetensors) {
  const fs::path copy = dir_ / "copy", half = dir_ / "half";
  Result r =
      Tool(absl::StrCat("convert ", export_.string(), " ", copy.string(), " --to safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("converted 21 tensors ("));
  EXPECT_THAT(r.output, HasSubstr("from safetensors " + export_.string() + " to safetensors " +
                                  copy.string()));
  auto loaded = Loaded(copy);
  for (size_t p = 0; p < model_->Parameters().size(); ++p) {
    const TensorView& want = model_->Parameters()[p].value;
    EXPECT_EQ(0, std::memcmp(want.data, loaded->Parameters()[p].value.data, want.nbytes()));
  }
  r = Tool(absl::StrCat("convert ", export_.string(), " ", half.string(),
                        " --from=safetensors --to=safetensors --dtype=bf16"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Result listed = Tool("list " + half.string());
  EXPECT_THAT(listed.output, HasSubstr("step 120"));
  EXPECT_THAT(listed.output,
              ContainsRegex("model/layers.0.attention.wq.weight +\\[64, 64\\] +bf16 +8.0 KiB"));
  loaded = Loaded(half);
  for (size_t p = 0; p < model_->Parameters().size(); ++p) {
    const float* want = model_->Parameters()[p].value.data_as<float>();
    const float* got = loaded->Parameters()[p].value.data_as<float>();
    for (int64_t i = 0; i < model_->Parameters()[p].value.numel(); ++i) {
      ASSERT_EQ(got[i], Bf16ToF32(F32ToBf16(want[i])));
    }
  }
}

// A dcp checkpoint holds training state besides the model; a conversion carries the model and
// its metadata, in either direction.
TEST_F(CheckpointCliTest, ConvertsBetweenDcpAndSafetensors) {
  auto dcp = std::move(registry_->Create<CheckpointPlugin>("dcp")).value();
  std::vector<CheckpointPiece> pieces = checkpoint_testing::ModelPieces(*model_);
  std::vector<float> exp_avg(64, 0.5f);
  pieces.push_back({"optimizer/exp_avg/norm.weight", {64}, {0}, FlatF32(exp_avg.data(), 64)});
  CheckpointMetadata metadata = checkpoint_testing::ModelMetadata(config_);
  metadata["train.step"] = "300";
  const fs::path trained = dir_ / "step-300", exported = dir_ / "hf", back = dir_ / "dcp-bf16";
  ASSERT_TRUE(dcp->Save(trained.string(), pieces, metadata, comm_).ok());

  Result listed = Tool("list " + trained.string());
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_THAT(listed.output, HasSubstr(trained.string() + ": dcp checkpoint, step 300\n"));
  EXPECT_THAT(listed.output,
              ContainsRegex("\noptimizer/exp_avg/norm.weight +\\[64\\] +f32 +256 B\n"));
  EXPECT_THAT(listed.output, HasSubstr("\n22 tensors, "));

  Result r =
      Tool(absl::StrCat("convert ", trained.string(), " ", exported.string(), " --to safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("converted 21 tensors (433.8 KiB) from dcp "));
  EXPECT_THAT(r.output, HasSubstr("left out 1 tensor outside model/ (such as "
                                  "optimizer/exp_avg/norm.weight): a conversion carries the "
                                  "model only"));
  EXPECT_THAT(Tool("list " + exported.string()).output,
              HasSubstr("safetensors checkpoint, step 300"));
  auto loaded = Loaded(exported);
  for (size_t p = 0; p < model_->Parameters().size(); ++p) {
    const TensorView& want = model_->Parameters()[p].value;
    EXPECT_EQ(0, std::memcmp(want.data, loaded->Parameters()[p].value.data, want.nbytes()));
  }

  r = Tool(absl::StrCat("convert ", exported.string(), " ", back.string(),
                        " --from safetensors --to dcp --dtype bf16"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("converted 21 tensors (216.9 KiB) from safetensors"));
  listed = Tool("list " + back.string());
  EXPECT_THAT(listed.output, HasSubstr("dcp checkpoint, step 300"));
  // titan-run resuming from it restores the weights only.
  EXPECT_THAT(listed.output, HasSubstr("  titan.model_only = true\n"));
  EXPECT_THAT(listed.output, ContainsRegex("model/norm.weight +\\[64\\] +bf16 +128 B"));
  auto restored = checkpoint_testing::SmallModel(config_, 13);
  std::vector<CheckpointPiece> restored_pieces = checkpoint_testing::ModelPieces(*restored);
  ASSERT_TRUE(dcp->Load(back.string(), restored_pieces, comm_).ok());
  for (size_t p = 0; p < model_->Parameters().size(); ++p) {
    const float* want = model_->Parameters()[p].value.data_as<float>();
    const float* got = restored->Parameters()[p].value.data_as<float>();
    for (int64_t i = 0; i < model_->Parameters()[p].value.numel(); ++i) {
      ASSERT_EQ(got[i], Bf16ToF32(F32ToBf16(want[i])));
    }
  }
}

TEST_F(CheckpointCliTest, ErrorsNameTheFolderOrFormat) {
  Result missing = Tool("list " + (dir_ / "nothing").string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.output, HasSubstr((dir_ / "nothing").string() + ": no such folder"));
  fs::create_directories(dir_ / "empty");
  Result empty = Tool("list " + (dir_ / "empty").string());
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_THAT(empty.output, HasSubstr("empty: no checkpoint format reads it (name one with "
                                      "--format):\n  dcp: "));
  EXPECT_THAT(empty.output, HasSubstr("\n  safetensors: " + (dir_ / "empty").string() +
                                      ": expected model.safetensors"));
  Result unknown = Tool("list " + export_.string() + " --format=safetensor");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.output, HasSubstr("no checkpoint plugin named 'safetensor'; available "
                                        "checkpoint plugins: "));
  EXPECT_THAT(unknown.output, HasSubstr("did you mean 'safetensors'"));
  Result to_unknown =
      Tool("convert " + export_.string() + " " + (dir_ / "x").string() + " --to=nosuch");
  EXPECT_EQ(to_unknown.exit_code, 1);
  EXPECT_THAT(to_unknown.output, HasSubstr("no checkpoint plugin named 'nosuch'"));
  EXPECT_FALSE(fs::exists(dir_ / "x"));
  Result onto_itself =
      Tool("convert " + export_.string() + " " + export_.string() + "/ --to=safetensors");
  EXPECT_EQ(onto_itself.exit_code, 1);
  EXPECT_THAT(onto_itself.output, HasSubstr("the destination is the source"));
}

TEST_F(CheckpointCliTest, ABadPluginFileIsSkippedWithAWarning) {
  fs::create_directories(dir_ / "plugins");
  std::ofstream(dir_ / "plugins" / "titan_checkpoint_junk.so") << "not a library\n";
  Result r = Tool("list " + export_.string() + " --plugin-dir=" + (dir_ / "plugins").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("titan-checkpoint: warning: skipping plugin file " +
                                  (dir_ / "plugins" / "titan_checkpoint_junk.so").string() +
                                  ": not a titan plugin: not a shared library"));
}

TEST_F(CheckpointCliTest, UsageErrorsExitTwo) {
  for (const char* args :
       {"", "lsit x", "list", "list a b", "convert a b", "convert a b --to",
        "convert a b --to=safetensors --dtype=f64", "list a --colour=x", "list a --to=dcp"}) {
    Result r = Tool(args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("titan-checkpoint: ")) << args;
  }
  EXPECT_THAT(Tool("lsit x").output, HasSubstr("unknown command 'lsit'; did you mean 'list'?"));
  Result help = Tool("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.output, HasSubstr("usage: titan-checkpoint list FOLDER"));
}

}  // namespace
}  // namespace titan
