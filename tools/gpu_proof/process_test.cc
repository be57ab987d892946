#include "tools/gpu_proof/process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "tools/gpu_proof/test_folder.h"

namespace titan::gpu_proof {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Read(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Whether `pid` is a live process (a zombie waiting for its parent is not).
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, name, state;
  if (!(stat >> pid_field >> name >> state)) return false;
  return state != "Z" && state != "X";
}

// Waits for `pid` to end, giving up after 20 s (killing is asynchronous), long before the
// `sleep 300` of the tests would end by itself; kills it then, so a failed test leaves nothing.
bool Ends(pid_t pid) {
  for (int i = 0; i < 200 && Alive(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const bool ended = !Alive(pid);
  if (!ended) kill(pid, SIGKILL);
  return ended;
}

Command Shell(const std::string& script) { return {{"/bin/sh", "-c", script}, {}, {}}; }

TEST(RunCommand, ReportsTheExitCodeAndKeepsAndLogsTheOutput) {
  TestFolder folder;
  const std::string log = folder.path() + "/proof.log";
  RunResult result = RunCommand(Shell("echo out; echo err >&2; exit 3"), log, 60);
  EXPECT_TRUE(result.started);
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.output, "out\nerr\n");
  RunCommand(Shell("echo second"), log, 60);
  const std::string text = Read(log);
  EXPECT_THAT(text, HasSubstr("$ /bin/sh -c 'echo out; echo err >&2; exit 3'\nout\nerr\n"));
  EXPECT_THAT(text, HasSubstr("s, status exit 3)"));
  EXPECT_THAT(text, HasSubstr("second\n$ /bin/sh -c 'echo second' ("));
}

TEST(RunCommand, OnTimeOutKillsTheChildAndItsGrandchild) {
  TestFolder folder;
  const std::string pid_file = folder.path() + "/grandchild.pid";
  RunResult result =
      RunCommand(Shell("sleep 300 & echo $! > " + pid_file + "; sleep 300; echo never"),
                 folder.path() + "/log", 1.0);
  EXPECT_TRUE(result.timed_out);
  EXPECT_FALSE(result.ok());
  EXPECT_THAT(result.Describe(), HasSubstr("timed out after"));
  EXPECT_THAT(result.output, Not(HasSubstr("never")));
  const pid_t grandchild = std::stoi(Read(pid_file));
  EXPECT_TRUE(Ends(grandchild)) << "the grandchild " << grandchild << " survived";
}

TEST(RunCommand, OnTimeOutKillsADescendantInAProcessGroupOfItsOwn) {
  TestFolder folder;
  const std::string pid_file = folder.path() + "/rank.pid";
  // As a launcher's ranks are: out of the command's group, so a signal to the group misses it.
  RunResult result = RunCommand(Shell("setsid sleep 300 & echo $! > " + pid_file + "; sleep 300"),
                                folder.path() + "/log", 1.0);
  EXPECT_TRUE(result.timed_out);
  const pid_t rank = std::stoi(Read(pid_file));
  EXPECT_TRUE(Ends(rank)) << "the process " << rank << " in its own group survived";
}

TEST(KillChildrenOnTermination, SigtermStopsTheCommandThenEndsTheProcess) {
  TestFolder folder;
  const std::string pid_file = folder.path() + "/grandchild.pid";
  const pid_t proof = fork();
  ASSERT_GE(proof, 0);
  if (proof == 0) {  // a proof, running a command when it is told to stop
    KillChildrenOnTermination();
    RunCommand(Shell("setsid sleep 300 & echo $! > " + pid_file + "; sleep 300"),
               folder.path() + "/log", 60);
    _exit(0);  // not reached: the signal ends it
  }
  for (int i = 0; i < 600 && Read(pid_file).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const pid_t grandchild = std::stoi(Read(pid_file));
  kill(proof, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(proof, &status, 0), proof);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
  EXPECT_TRUE(Ends(grandchild)) << "the command's process " << grandchild << " survived";
  EXPECT_THAT(Read(folder.path() + "/log"), HasSubstr("[stopped by signal 15]"));
}

TEST(RunCommand, AChildIgnoringSigtermIsKilled) {
  TestFolder folder;
  RunResult result = RunCommand(Shell("trap '' TERM; sleep 300"), folder.path() + "/log", 1.0,
                                /*grace_s=*/0.5);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.signal, SIGKILL);
}

TEST(RunCommand, ReportsTheSignalThatEndedTheChild) {
  TestFolder folder;
  RunResult result = RunCommand(Shell("kill -SEGV $$"), folder.path() + "/log", 60);
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.signal, SIGSEGV);
  EXPECT_THAT(result.Describe(), HasSubstr("signal 11"));
}

TEST(RunCommand, SetsAndUnsetsTheEnvironment) {
  TestFolder folder;
  setenv("TITAN_GPU_PROOF_TEST_GONE", "still here", 1);
  Command command = Shell("echo \"$TITAN_GPU_PROOF_TEST_SET|$TITAN_GPU_PROOF_TEST_GONE\"");
  command.set_env = {{"TITAN_GPU_PROOF_TEST_SET", "set"}};
  command.unset_env = {"TITAN_GPU_PROOF_TEST_GONE"};
  RunResult result = RunCommand(command, folder.path() + "/log", 60);
  unsetenv("TITAN_GPU_PROOF_TEST_GONE");
  EXPECT_TRUE(result.ok()) << result.Describe();
  EXPECT_EQ(result.output, "set|\n");
}

TEST(RunCommand, AProgramThatCannotRunSaysSo) {
  TestFolder folder;
  RunResult result =
      RunCommand({{"/nonexistent/titan-run", "--version"}, {}, {}}, folder.path() + "/log", 60);
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_THAT(result.output, HasSubstr("cannot run /nonexistent/titan-run"));
}

TEST(ChildEnvironment, ReplacesSetsAndRemoves) {
  Command command{{}, {{"B", "new"}, {"D", "4"}}, {"C"}};
  EXPECT_THAT(ChildEnvironment({"A=1", "B=old", "C=3", "BB=5"}, command),
              ElementsAre("A=1", "BB=5", "B=new", "D=4"));
}

// A child reads the first of two entries of one name: a name set twice appears once, with the
// value set last.
TEST(ChildEnvironment, TheLastSettingOfANameWins) {
  Command command{{}, {{"OMP_NUM_THREADS", "4"}, {"X", "1"}, {"OMP_NUM_THREADS", "16"}}, {}};
  EXPECT_THAT(ChildEnvironment({"OMP_NUM_THREADS=2"}, command),
              ElementsAre("X=1", "OMP_NUM_THREADS=16"));
}

TEST(CommandLine, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(CommandLine({"/bin/titan-run", "--training.steps=10",
                         "--float8.filter_fqns=[\"output\"]", "it's"}),
            "/bin/titan-run --training.steps=10 '--float8.filter_fqns=[\"output\"]' 'it'\\''s'");
}

TEST(Tail, TheLastLines) {
  EXPECT_EQ(Tail("a\nb\nc\n", 2), "b\nc\n");
  EXPECT_EQ(Tail("a\nb\nc", 2), "b\nc");
  EXPECT_EQ(Tail("a\nb\n", 5), "a\nb\n");
  EXPECT_EQ(Tail("", 3), "");
}

}  // namespace
}  // namespace titan::gpu_proof
