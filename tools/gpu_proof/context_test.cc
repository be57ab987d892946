#include "tools/gpu_proof/context.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace titan::gpu_proof {
namespace {

using ::testing::HasSubstr;

TEST(Findings, NoProblemIsAPass) {
  Findings findings;
  findings.details["x"] = 1;
  PartOutcome outcome = findings.Outcome();
  EXPECT_EQ(outcome.status, PartStatus::kPass);
  EXPECT_TRUE(outcome.reason.empty());
  EXPECT_EQ(outcome.details["x"], 1);
}

TEST(Findings, ProblemsFailWithEveryReason) {
  Findings findings;
  findings.Problem("one");
  findings.Problem("two");
  PartOutcome outcome = findings.Outcome();
  EXPECT_EQ(outcome.status, PartStatus::kFail);
  EXPECT_EQ(outcome.reason, "one; two");
}

TEST(Findings, ARunPastItsTimeMakesThePartTimedOut) {
  TitanRun run;
  run.what = "the cuda f32 run";
  run.folder = "/w/cuda_f32";
  run.run.started = true;
  run.run.timed_out = true;
  run.run.output = "step 1\nstep 2\n";
  Findings findings;
  findings.RunWentWrong("cuda_f32", run);
  PartOutcome outcome = findings.Outcome();
  EXPECT_EQ(outcome.status, PartStatus::kTimedOut);
  EXPECT_EQ(outcome.reason, "timed out during the cuda f32 run");
  EXPECT_EQ(outcome.details["cuda_f32"]["output"], "step 1\nstep 2\n");
  EXPECT_EQ(outcome.details["cuda_f32"]["folder"], "/w/cuda_f32");
}

TEST(Findings, ARunThatExitedBadlyOrLoggedNothingReadableFails) {
  TitanRun crashed;
  crashed.what = "the tp2 run";
  crashed.run.started = true;
  crashed.run.exit_code = 1;
  TitanRun unreadable;
  unreadable.what = "the fsdp2 run";
  unreadable.run.started = true;
  unreadable.run.exit_code = 0;
  unreadable.metrics = absl::NotFoundError("no metrics file /w/metrics.jsonl");
  Findings findings;
  findings.RunWentWrong("tp2", crashed);
  findings.RunWentWrong("fsdp2", unreadable);
  PartOutcome outcome = findings.Outcome();
  EXPECT_EQ(outcome.status, PartStatus::kFail);
  EXPECT_THAT(outcome.reason, HasSubstr("the tp2 run ended with exit 1"));
  EXPECT_THAT(outcome.reason, HasSubstr("the fsdp2 run: no metrics file /w/metrics.jsonl"));
}

}  // namespace
}  // namespace titan::gpu_proof
