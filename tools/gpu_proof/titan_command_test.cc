#include "tools/gpu_proof/titan_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace titan::gpu_proof {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;

TEST(DebugRecipeCommand, TheBundlesTitanRunRecipeAndCorpusThenTheOverrides) {
  EXPECT_THAT(
      DebugRecipeCommand(Bundle{"/b"}, "/w/out", {"--training.steps=10"}),
      ElementsAre("/b/bin/titan-run", "--recipe", "/b/recipes/llama3_debug.toml",
                  "--job.dump_folder=/w/out", "--training.dataset_path=/b/data/fortunes",
                  "--generate.max_new_tokens=0", "--validation.freq=1000", "--training.steps=10"));
}

TEST(DebugRecipeCommand, SeveralRanksUnderTheBundlesLauncher) {
  std::vector<std::string> command = DebugRecipeCommand(Bundle{"/b"}, "/w/out", {}, 2);
  ASSERT_GE(command.size(), 6u);
  EXPECT_THAT(std::vector<std::string>(command.begin(), command.begin() + 6),
              ElementsAre("/b/bin/mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2",
                          "/b/bin/titan-run"));
}

TEST(F32LossOverrides, TheReferenceAndTheGpuRunDifferOnlyInTheDevice) {
  std::vector<std::string> cpu = F32LossOverrides("cpu"), cuda = F32LossOverrides("cuda");
  ASSERT_EQ(cpu.size(), cuda.size());
  int differences = 0;
  for (size_t i = 0; i < cpu.size(); ++i) differences += cpu[i] != cuda[i];
  EXPECT_EQ(differences, 1);
  EXPECT_THAT(cpu, Contains("--job.device=cpu"));
  EXPECT_THAT(cuda, Contains("--training.mixed_precision_param=float32"));
  EXPECT_THAT(cuda, Contains("--training.steps=10"));
}

TEST(ResumeOverrides, TwentyStepsAnAsynchronousCheckpointEveryTenAndAnEvalEveryFive) {
  std::vector<std::string> resume = ResumeOverrides("cuda");
  for (const char* expected :
       {"--training.steps=20", "--checkpoint.interval=10", "--checkpoint.async_mode=async",
        "--validation.freq=5", "--checkpoint.last_save_model_only=false", "--job.device=cuda"}) {
    EXPECT_THAT(resume, Contains(expected));
  }
}

}  // namespace
}  // namespace titan::gpu_proof
