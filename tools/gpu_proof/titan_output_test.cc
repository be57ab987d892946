#include "tools/gpu_proof/titan_output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tools/gpu_proof/test_folder.h"

namespace titan::gpu_proof {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BundlePluginPaths, TheTitanPluginFilesByTheirFoldersRealPath) {
  TestFolder folder;
  folder.Write("real/titan_comm_mpi.so");
  folder.Write("real/titan_device_cuda.so");
  folder.Write("real/libother.so");
  folder.Write("real/titan_old.so.1");
  std::filesystem::create_directory_symlink(folder.path() + "/real", folder.path() + "/link");
  const std::string real = std::filesystem::canonical(folder.path() + "/real").string();
  EXPECT_THAT(BundlePluginPaths(folder.path() + "/link"),
              ElementsAre(real + "/titan_comm_mpi.so", real + "/titan_device_cuda.so"));
  EXPECT_TRUE(BundlePluginPaths(folder.path() + "/nowhere").empty());
}

constexpr char kListing[] =
    "KIND       NAME           VERSION  ABI  PATH / SUMMARY\n"
    "comm       mpi            0.1.0    3    /p/titan_comm_mpi.so\n"
    "                                  MPI communicator\n"
    "device     cuda           0.1.0    3    /p/titan_device_cuda.so\n"
    "                                  CUDA device\n";

TEST(PluginListingProblems, NoneWhenEveryPluginIsListed) {
  EXPECT_TRUE(
      PluginListingProblems(kListing, {"/p/titan_comm_mpi.so", "/p/titan_device_cuda.so"}).empty());
}

TEST(PluginListingProblems, APluginNotListedOrAFileSkippedIsAProblem) {
  EXPECT_THAT(PluginListingProblems(kListing, {"/p/titan_comm_mpi.so", "/p/titan_comm_nccl.so"}),
              ElementsAre("not listed: /p/titan_comm_nccl.so"));
  const std::string skipped =
      std::string(kListing) + "[warning] skipping plugin file /p/titan_x.so: ABI 2, expected 3\n";
  EXPECT_THAT(PluginListingProblems(skipped, {"/p/titan_comm_mpi.so"}),
              ElementsAre(HasSubstr("rejected: [warning] skipping plugin file /p/titan_x.so")));
}

TEST(PluginListingProblems, APathIsMatchedWhole) {
  EXPECT_THAT(PluginListingProblems(kListing, {"/p/titan_comm_mpi.s"}),
              ElementsAre("not listed: /p/titan_comm_mpi.s"));
}

TEST(SaysLoadedStep, OnlyAWholeLoadOfThatStep) {
  const std::string loaded = "[info] [checkpoint] loaded /w/checkpoint/step-10 (step 10)\n";
  EXPECT_TRUE(SaysLoadedStep("starting\n" + loaded, 10));
  EXPECT_FALSE(SaysLoadedStep(loaded, 1));
  EXPECT_FALSE(SaysLoadedStep("[checkpoint] loaded /w/checkpoint/step-100 (step 100)", 10));
  EXPECT_FALSE(
      SaysLoadedStep("[checkpoint] loaded /w/checkpoint/step-10 (step 10; not restored: rng)", 10));
  EXPECT_FALSE(SaysLoadedStep("[checkpoint] saved /w/checkpoint/step-10 (step 10)", 10));
}

TEST(SameBytes, ComparesTheContents) {
  TestFolder folder;
  const std::string a = folder.Write("a", std::string("x\0y", 3));
  const std::string b = folder.Write("b", std::string("x\0y", 3));
  const std::string c = folder.Write("c", std::string("x\0z", 3));
  const std::string d = folder.Write("d", "x");
  EXPECT_EQ(SameBytes(a, b).value(), true);
  EXPECT_EQ(SameBytes(a, c).value(), false);
  EXPECT_EQ(SameBytes(a, d).value(), false);
  EXPECT_THAT(SameBytes(a, "/nonexistent").status().message(), HasSubstr("/nonexistent"));
}

}  // namespace
}  // namespace titan::gpu_proof
