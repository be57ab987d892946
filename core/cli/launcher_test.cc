#include "core/cli/launcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace titan {
namespace {

using ::testing::HasSubstr;

// A simulated environment: the variables a launcher would have set.
class Environment {
 public:
  explicit Environment(std::map<std::string, std::string> variables)
      : variables_(std::move(variables)) {}
  EnvironmentLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto found = variables_.find(name);
      return found == variables_.end() ? nullptr : found->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> variables_;
};

// What srun sets for task 11 of a step of 16 tasks on 2 nodes of 8 GPUs (the second node's
// fourth task), with the allocation's own variables beside them.
std::map<std::string, std::string> SrunTask11Of16() {
  return {{"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "0"},     {"SLURM_NTASKS", "16"},
          {"SLURM_PROCID", "11"},   {"SLURM_LOCALID", "3"},     {"SLURM_NODEID", "1"},
          {"SLURM_NNODES", "2"},    {"SLURM_GPUS_ON_NODE", "8"}};
}

TEST(LaunchPlacement, StartedDirectlyHasNone) {
  Environment env(std::map<std::string, std::string>{{"HOME", "/root"}});
  auto placement = ReadLaunchPlacement(env.lookup());
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_FALSE(placement->has_value());
}

TEST(LaunchPlacement, SrunGivesRankWorldSizeLocalRankAndDevice) {
  Environment env(SrunTask11Of16());
  auto placement = ReadLaunchPlacement(env.lookup());
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_TRUE(placement->has_value());
  const LaunchPlacement& p = **placement;
  EXPECT_EQ(p.launcher, "srun");
  EXPECT_EQ(p.rank, 11);
  EXPECT_EQ(p.world_size, 16);
  EXPECT_EQ(p.local_rank, 3);
  EXPECT_EQ(p.variables, "SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID");
  // On a node of 8 GPUs the fourth task computes on GPU 3, with NCCL (one GPU each) or not.
  EXPECT_EQ(DeviceOfLocalRank(p.local_rank, 8, /*may_share=*/false, "cuda", "nccl").value(), 3);
  EXPECT_EQ(DeviceOfLocalRank(p.local_rank, 8, /*may_share=*/true, "cuda", "mpi").value(), 3);
}

// A batch script's own shell has SLURM_NTASKS and SLURM_PROCID but is one process; only srun's
// tasks run inside a job step.
TEST(LaunchPlacement, ABatchScriptOutsideAStepIsNotLaunched) {
  std::map<std::string, std::string> batch = SrunTask11Of16();
  batch.erase("SLURM_STEP_ID");
  Environment env(batch);
  auto placement = ReadLaunchPlacement(env.lookup());
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_FALSE(placement->has_value());
}

// mpirun inside an allocation starts its daemons with srun, so its ranks inherit a step's Slurm
// variables (rank = node index); OpenMPI's own say where the rank is.
TEST(LaunchPlacement, MpirunInsideAnAllocationWinsOverTheInheritedSlurmVariables) {
  std::map<std::string, std::string> variables = SrunTask11Of16();
  variables["SLURM_NTASKS"] = "2", variables["SLURM_PROCID"] = "1",
  variables["SLURM_LOCALID"] = "0";
  variables["OMPI_COMM_WORLD_SIZE"] = "16";
  variables["OMPI_COMM_WORLD_RANK"] = "13";
  variables["OMPI_COMM_WORLD_LOCAL_RANK"] = "5";
  Environment env(variables);
  auto placement = ReadLaunchPlacement(env.lookup());
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_TRUE(placement->has_value());
  EXPECT_EQ((*placement)->launcher, "mpirun");
  EXPECT_EQ((*placement)->rank, 13);
  EXPECT_EQ((*placement)->world_size, 16);
  EXPECT_EQ((*placement)->local_rank, 5);
}

TEST(LaunchPlacement, PmiWithoutALocalRankTakesLocalRankZero) {
  Environment env(std::map<std::string, std::string>{{"PMI_SIZE", "4"}, {"PMI_RANK", "2"}});
  auto placement = ReadLaunchPlacement(env.lookup());
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_TRUE(placement->has_value());
  EXPECT_EQ((*placement)->launcher, "PMI");
  EXPECT_EQ((*placement)->rank, 2);
  EXPECT_EQ((*placement)->local_rank, 0);
}

TEST(LaunchPlacement, PmixWithoutARankLeavesItUnknown) {
  Environment env(std::map<std::string, std::string>{{"PMIX_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}});
  auto placement = ReadLaunchPlacement(env.lookup());
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_TRUE(placement->has_value());
  EXPECT_FALSE((*placement)->rank.has_value());
  EXPECT_EQ((*placement)->world_size, 4);
  EXPECT_EQ((*placement)->local_rank, 1);
}

TEST(LaunchPlacement, AVariableThatIsNoRankIsAnErrorNamingIt) {
  std::map<std::string, std::string> variables = SrunTask11Of16();
  variables["SLURM_LOCALID"] = "three";
  Environment words(variables);
  auto placement = ReadLaunchPlacement(words.lookup());
  ASSERT_FALSE(placement.ok());
  EXPECT_THAT(placement.status().message(),
              HasSubstr("SLURM_LOCALID = \"three\": expected this process's rank on its machine, a "
                        "whole number from 0 to 15 (set by srun, which started this titan-run)"));

  variables = SrunTask11Of16();
  variables["SLURM_PROCID"] = "16";
  Environment past(variables);
  placement = ReadLaunchPlacement(past.lookup());
  ASSERT_FALSE(placement.ok());
  EXPECT_THAT(placement.status().message(), HasSubstr("SLURM_PROCID = \"16\""));

  variables["SLURM_NTASKS"] = "0";
  Environment none(variables);
  placement = ReadLaunchPlacement(none.lookup());
  ASSERT_FALSE(placement.ok());
  EXPECT_THAT(placement.status().message(),
              HasSubstr("SLURM_NTASKS = \"0\": expected the number of ranks, a whole number "
                        "from 1 (set by srun"));
}

TEST(DeviceOfLocalRank, TooFewDevicesAreRefusedNamingTheCounts) {
  auto none = DeviceOfLocalRank(0, 0, /*may_share=*/true, "cuda", "mpi");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "job.device = \"cuda\": local rank 0 needs device 0, but this machine has 0 cuda "
            "device(s)");
  auto nccl = DeviceOfLocalRank(9, 8, /*may_share=*/false, "cuda", "nccl");
  ASSERT_FALSE(nccl.ok());
  EXPECT_THAT(nccl.status().message(),
              HasSubstr("local rank 9 needs device 9, but this machine has 8 cuda device(s); "
                        "launch at most 8 ranks per machine with comm.backend = \"nccl\""));
  // A communicator that stages through the host lets ranks share devices round robin.
  EXPECT_EQ(DeviceOfLocalRank(9, 8, /*may_share=*/true, "cuda", "mpi").value(), 1);
}

}  // namespace
}  // namespace titan
