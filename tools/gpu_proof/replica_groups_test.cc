#include "tools/gpu_proof/replica_groups.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tools/gpu_proof/process.h"

namespace titan::gpu_proof {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(BackgroundScript, RunsEveryCommandAtOnceAndKeepsEachOnesStatusAndOutput) {
  const std::string dir = std::filesystem::path(testing::TempDir()) / "background_script";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // The first waits for the second's file: they must run side by side.
  const std::string flag = dir + "/second started";
  const std::vector<std::vector<std::string>> commands = {
      {"/bin/sh", "-c", "while [ ! -e \"$0\" ]; do sleep 0.05; done; echo first; exit 3", flag},
      {"/bin/sh", "-c", "touch \"$0\"; echo 'second, quoted'", flag}};
  const std::vector<std::string> logs = {dir + "/a log", dir + "/b.log"};
  const std::vector<std::string> exits = {dir + "/a.exit", dir + "/b.exit"};
  Command command;
  command.argv = {"/bin/sh", "-c", BackgroundScript(commands, logs, exits)};
  const RunResult run = RunCommand(command, dir + "/run.log", 60);
  ASSERT_TRUE(run.ok()) << run.Describe() << run.output;
  EXPECT_EQ(Read(exits[0]), "3\n");
  EXPECT_EQ(Read(exits[1]), "0\n");
  EXPECT_EQ(Read(logs[0]), "first\n");
  EXPECT_EQ(Read(logs[1]), "second, quoted\n");
}

}  // namespace
}  // namespace titan::gpu_proof
