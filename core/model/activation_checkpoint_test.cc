#include "core/model/activation_checkpoint.h"

#include <gtest/gtest.h>

namespace titan {
namespace {

TEST(ActivationCheckpointTest, PoliciesFollowTorchTitan) {
  auto every_2 = ParseActivationCheckpoint("selective", "2");
  ASSERT_TRUE(every_2.ok());
  EXPECT_EQ(every_2->PolicyFor(0), BlockPolicy::kKeepAll);
  EXPECT_EQ(every_2->PolicyFor(1), BlockPolicy::kRecomputeAll);
  auto op = ParseActivationCheckpoint("selective", "op");
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->PolicyFor(3), BlockPolicy::kKeepMatmuls);
  EXPECT_EQ(ParseActivationCheckpoint("full", "")->PolicyFor(0), BlockPolicy::kRecomputeAll);
  EXPECT_EQ(ParseActivationCheckpoint("none", "")->PolicyFor(0), BlockPolicy::kKeepAll);
  EXPECT_TRUE(KeepsStage(BlockPolicy::kKeepMatmuls, BlockStage::kAttention));
  EXPECT_FALSE(KeepsStage(BlockPolicy::kKeepMatmuls, BlockStage::kFfnNorm));
}

TEST(ActivationCheckpointTest, RejectsBadValues) {
  EXPECT_FALSE(ParseActivationCheckpoint("some", "").ok());
  auto zero = ParseActivationCheckpoint("selective", "0");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("found '0'"), std::string::npos);
}

}  // namespace
}  // namespace titan
