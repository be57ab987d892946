#include "tools/gpu_proof/gtest_results.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>

namespace titan::gpu_proof {
namespace {

using ::testing::HasSubstr;

// What GoogleTest writes: a passing case, a failing one, a skipped one and a disabled one.
constexpr char kReport[] = R"({"testsuites": [
  {"name": "Gemm", "testsuite": [
    {"name": "Matches", "status": "RUN", "result": "COMPLETED", "time": "0.1s"},
    {"name": "Bf16", "status": "RUN", "result": "COMPLETED",
     "failures": [{"failure": "x.cc:3\nExpected equality", "type": ""}]}]},
  {"name": "Nccl", "testsuite": [
    {"name": "TwoGpus", "status": "RUN", "result": "SKIPPED"},
    {"name": "DISABLED_Slow", "status": "NOTRUN", "result": "SUPPRESSED"}]}]})";

RunResult Exited(int code) {
  RunResult run;
  run.started = true;
  run.exit_code = code;
  return run;
}

TEST(ParseGtestJson, EveryCaseWithItsStatusAndFailureText) {
  absl::StatusOr<std::vector<TestCase>> cases = ParseGtestJson(kReport, "compute");
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_EQ(cases->size(), 4u);
  EXPECT_EQ((*cases)[0].test, "Gemm.Matches");
  EXPECT_EQ((*cases)[0].status, "pass");
  EXPECT_EQ((*cases)[1].status, "fail");
  EXPECT_THAT((*cases)[1].failure, HasSubstr("Expected equality"));
  EXPECT_EQ((*cases)[2].status, "skipped");
  EXPECT_EQ((*cases)[3].status, "skipped");
  EXPECT_EQ((*cases)[3].binary, "compute");
}

TEST(ParseGtestJson, RefusesWhatIsNotAReportNamingTheBinary) {
  EXPECT_THAT(ParseGtestJson("{\"testsuites\": [", "compute").status().message(),
              HasSubstr("compute"));
  EXPECT_FALSE(ParseGtestJson("[1, 2]", "compute").ok());
  EXPECT_FALSE(ParseGtestJson(R"({"testsuites": [{"name": 3, "testsuite": [{}]}]})", "c").ok());
}

TEST(JudgeTestBinaries, PassesWhenEveryBinaryExitedCleanlyAndNoCaseFailed) {
  BinaryRun run{"device",
                Exited(0),
                "",
                {{"device", "A.b", "pass", "", ""}, {"device", "A.c", "skipped", "", ""}}};
  GroupJudgement judgement = JudgeTestBinaries({run}, true);
  EXPECT_TRUE(judgement.pass) << judgement.reason;
}

TEST(JudgeTestBinaries, AFailedCaseFailsNamingIt) {
  BinaryRun run{"compute", Exited(1), "", {{"compute", "Gemm.Bf16", "fail", "no", ""}}};
  GroupJudgement judgement = JudgeTestBinaries({run}, true);
  EXPECT_FALSE(judgement.pass);
  EXPECT_THAT(judgement.reason, HasSubstr("compute Gemm.Bf16"));
}

TEST(JudgeTestBinaries, ACrashFailsNamingTheBinaryEvenWhenItsCasesPassed) {
  RunResult crashed;
  crashed.started = true;
  crashed.signal = SIGSEGV;
  BinaryRun good{"device", Exited(0), "", {{"device", "A.b", "pass", "", ""}}};
  BinaryRun bad{"compute", crashed, "compute wrote no test results (x.json)", {}};
  GroupJudgement judgement = JudgeTestBinaries({good, bad}, true);
  EXPECT_FALSE(judgement.pass);
  EXPECT_FALSE(judgement.timed_out);
  EXPECT_THAT(judgement.reason, HasSubstr("compute: signal 11"));
}

TEST(JudgeTestBinaries, AReasonNamesTheFirstFiveFailuresAndCountsTheRest) {
  BinaryRun run{"compute", Exited(1), "", {}};
  for (int i = 0; i < 7; ++i) {
    run.cases.push_back({"compute", "Gemm.Case" + std::to_string(i), "fail", "no", ""});
  }
  GroupJudgement judgement = JudgeTestBinaries({run}, true);
  EXPECT_THAT(judgement.reason, HasSubstr("7 failed: compute Gemm.Case0, compute Gemm.Case1"));
  EXPECT_THAT(judgement.reason, HasSubstr("compute Gemm.Case4 and 2 more"));
  EXPECT_THAT(judgement.reason, ::testing::Not(HasSubstr("Gemm.Case5")));
}

TEST(JudgeTestBinaries, AnExitWithoutResultsFails) {
  BinaryRun run{"device", Exited(0), "device wrote no test results (d.json)", {}};
  GroupJudgement judgement = JudgeTestBinaries({run}, true);
  EXPECT_FALSE(judgement.pass);
  EXPECT_THAT(judgement.reason, HasSubstr("device wrote no test results"));
}

TEST(JudgeTestBinaries, NothingRunIsAFailure) {
  BinaryRun run{"nccl", Exited(0), "", {{"nccl", "Nccl.TwoGpus", "skipped", "", ""}}};
  GroupJudgement judgement = JudgeTestBinaries({run}, true);
  EXPECT_FALSE(judgement.pass);
  EXPECT_THAT(judgement.reason, HasSubstr("no test case ran"));
}

TEST(JudgeTestBinaries, AMissingBinaryAndATimeOutAreSaid) {
  RunResult missing;
  missing.output = "missing from the bundle: /b/tests/nccl";
  RunResult slow;
  slow.started = true;
  slow.timed_out = true;
  GroupJudgement judgement =
      JudgeTestBinaries({{"nccl", missing, "", {}}, {"device", slow, "", {}}}, true);
  EXPECT_FALSE(judgement.pass);
  EXPECT_TRUE(judgement.timed_out);
  EXPECT_THAT(judgement.reason, HasSubstr("nccl: missing from the bundle: /b/tests/nccl"));
  EXPECT_THAT(judgement.reason, HasSubstr("device: timed out"));
}

// How GoogleTest prints a skipped case, with the message of GTEST_SKIP() << "...".
constexpr char kSkippedOutput[] =
    "[ RUN      ] NcclOnGpu.CollectivesOnOneRank\n"
    "../plugins/comm/nccl/nccl_comm_test.cc:84: Skipped\n"
    "no CUDA device: the nccl plugin's GPU tests need one\n"
    "\n"
    "[  SKIPPED ] NcclOnGpu.CollectivesOnOneRank (0 ms)\n"
    "[ RUN      ] NcclCommTest.Loads\n"
    "[       OK ] NcclCommTest.Loads (9 ms)\n"
    "[ RUN      ] CudaDevice.Absent\n"
    "x.cc:20: Skipped\n"
    "a CUDA device is present; this checks its absence\n"
    "[  SKIPPED ] CudaDevice.Absent (0 ms)\n"
    "[  SKIPPED ] 2 tests, listed below:\n"
    "[  SKIPPED ] NcclOnGpu.CollectivesOnOneRank\n";

TEST(SkipMessages, TheMessageOfEachSkippedCase) {
  std::map<std::string, std::string> messages = SkipMessages(kSkippedOutput);
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages["NcclOnGpu.CollectivesOnOneRank"],
            "no CUDA device: the nccl plugin's GPU tests need one");
  EXPECT_EQ(messages["CudaDevice.Absent"], "a CUDA device is present; this checks its absence");
}

TEST(JudgeTestBinaries, ACaseSkippedForWantOfADeviceFailsWhereTheDriverShowsOne) {
  BinaryRun run{"nccl",
                Exited(0),
                "",
                {{"nccl", "NcclCommTest.Loads", "pass", "", ""},
                 {"nccl", "NcclOnGpu.CollectivesOnOneRank", "skipped", "",
                  "no CUDA device: the nccl plugin's GPU tests need one"},
                 {"nccl", "CudaDevice.Absent", "skipped", "", "a CUDA device is present"}}};
  GroupJudgement judgement = JudgeTestBinaries({run}, true);
  EXPECT_FALSE(judgement.pass);
  EXPECT_THAT(judgement.reason, HasSubstr("1 skipped for want of a CUDA device though the driver "
                                          "shows one: nccl NcclOnGpu.CollectivesOnOneRank"));
  // Without a device the same skip is what is expected.
  EXPECT_TRUE(JudgeTestBinaries({run}, false).pass);
}

}  // namespace
}  // namespace titan::gpu_proof
