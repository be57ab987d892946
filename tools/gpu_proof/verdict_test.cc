#include "tools/gpu_proof/verdict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace titan::gpu_proof {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

PartResult Part(const std::string& name, PartStatus status, const std::string& reason = "") {
  return {name, status, reason, 1, 60, Json::object()};
}

std::vector<PartResult> AllPass() {
  std::vector<PartResult> parts;
  for (const char* name :
       {"bundle", "kernels", "nccl", "losses_cpu_vs_cuda", "resume", "layouts", "throughput"}) {
    parts.push_back(Part(name, PartStatus::kPass));
  }
  return parts;
}

TEST(DecideVerdict, PassWhenEveryPartPassed) {
  Verdict verdict = DecideVerdict(true, AllPass());
  EXPECT_EQ(verdict.name, "pass");
  EXPECT_EQ(verdict.exit_code, kExitPass);
  EXPECT_TRUE(verdict.notes.empty());
}

TEST(DecideVerdict, AFailureOrATimeOutFails) {
  for (PartStatus status : {PartStatus::kFail, PartStatus::kTimedOut}) {
    std::vector<PartResult> parts = AllPass();
    parts[4] = Part("resume", status, "the losses differ");
    Verdict verdict = DecideVerdict(true, parts);
    EXPECT_EQ(verdict.name, "fail");
    EXPECT_EQ(verdict.exit_code, kExitFail);
    EXPECT_THAT(verdict.notes, Contains(HasSubstr("resume: ")));
  }
}

TEST(DecideVerdict, NoLauncherIsAllowedAndListed) {
  std::vector<PartResult> parts = AllPass();
  parts[5] = Part("layouts", PartStatus::kNotRun, kNoLauncher);
  Verdict verdict = DecideVerdict(true, parts);
  EXPECT_EQ(verdict.name, "pass");
  EXPECT_THAT(verdict.notes, Contains("layouts: not run: no launcher"));
}

// Async TP's figure needs two GPUs; on one the part says so and the proof still passes.
TEST(DecideVerdict, APartNeedingTwoDevicesOnOneIsAllowedAndListed) {
  std::vector<PartResult> parts = AllPass();
  parts.push_back(Part("async_tp", PartStatus::kNotRun, kOneDevice));
  Verdict verdict = DecideVerdict(true, parts);
  EXPECT_EQ(verdict.name, "pass");
  EXPECT_THAT(verdict.notes,
              Contains("async_tp: not run: one CUDA device: the part needs two or more"));
}

TEST(DecideVerdict, APartSkippedForWantOfTimeFails) {
  std::vector<PartResult> parts = AllPass();
  parts[6] = Part("throughput", PartStatus::kNotRun, kOverallDeadline);
  EXPECT_EQ(DecideVerdict(true, parts).exit_code, kExitFail);
}

TEST(DecideVerdict, NoDeviceIsNeverAPass) {
  std::vector<PartResult> parts = {Part("bundle", PartStatus::kPass)};
  for (const char* name : {"kernels", "nccl", "throughput"}) {
    parts.push_back(Part(name, PartStatus::kNotRun, kNoDevice));
  }
  Verdict verdict = DecideVerdict(false, parts);
  EXPECT_EQ(verdict.name, "no device");
  EXPECT_EQ(verdict.exit_code, kExitNoDevice);
}

TEST(DecideVerdict, ABrokenBundleFailsEvenWithoutADevice) {
  std::vector<PartResult> parts = {Part("bundle", PartStatus::kFail, "losses"),
                                   Part("kernels", PartStatus::kNotRun, kNoDevice)};
  EXPECT_EQ(DecideVerdict(false, parts).exit_code, kExitFail);
}

TEST(DecideVerdict, NothingPassedFails) {
  EXPECT_EQ(DecideVerdict(true, {}).exit_code, kExitFail);
  EXPECT_EQ(DecideVerdict(true, {Part("layouts", PartStatus::kNotRun, kNoLauncher)}).exit_code,
            kExitFail);
}

TEST(DecideVerdict, NoDeviceAsAReasonWithADeviceFails) {
  std::vector<PartResult> parts = AllPass();
  parts[1] = Part("kernels", PartStatus::kNotRun, kNoDevice);
  EXPECT_EQ(DecideVerdict(true, parts).exit_code, kExitFail);
}

TEST(ToJson, AReasonUnlessPassed) {
  Json passed = ToJson(Part("bundle", PartStatus::kPass));
  EXPECT_EQ(passed["status"], "pass");
  EXPECT_FALSE(passed.contains("reason"));
  Json timed_out = ToJson(Part("kernels", PartStatus::kTimedOut, "timed out during x"));
  EXPECT_EQ(timed_out["status"], "timed out");
  EXPECT_EQ(timed_out["reason"], "timed out during x");
  EXPECT_EQ(timed_out["budget_s"], 60);
}

}  // namespace
}  // namespace titan::gpu_proof
