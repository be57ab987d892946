#include "tools/gpu_proof/budget.h"

#include <gtest/gtest.h>

namespace titan::gpu_proof {
namespace {

TEST(PartBudgets, ThePartsInOrderFillTheDefaultDeadline) {
  std::vector<PartBudget> parts = PartBudgets(kDefaultDeadlineS);
  ASSERT_EQ(parts.size(), 9u);
  EXPECT_EQ(parts[0].name, "bundle");
  EXPECT_EQ(parts[0].budget_s, 30);
  EXPECT_EQ(parts[6].name, "replica_groups");
  EXPECT_EQ(parts[7].name, "throughput");
  EXPECT_EQ(parts[7].budget_s, 285);  // eight runs and a profiled one, six of them 1B or 8B-wide
  EXPECT_EQ(parts[8].name, "async_tp");
  double total = 0;
  for (const PartBudget& part : parts) total += part.budget_s;
  EXPECT_DOUBLE_EQ(total, 600);
}

TEST(PartBudgets, ScaleWithTheDeadline) {
  std::vector<PartBudget> half = PartBudgets(300);
  EXPECT_DOUBLE_EQ(half[0].budget_s, 15);
  EXPECT_DOUBLE_EQ(half[1].budget_s, 30);
}

TEST(PartLimitS, IsTheBudgetOrWhatIsLeftWhicheverIsLess) {
  EXPECT_DOUBLE_EQ(PartLimitS(60, 0, 480), 60);
  EXPECT_DOUBLE_EQ(PartLimitS(90, 450, 480), 30);
}

TEST(PartLimitS, IsZeroWhenTooLittleIsLeftToStart) {
  EXPECT_EQ(PartLimitS(90, 479.5, 480), 0);
  EXPECT_EQ(PartLimitS(90, 500, 480), 0);
}

TEST(ShareS, SplitsWhatIsLeftByWeight) {
  EXPECT_DOUBLE_EQ(ShareS(90, 1, 6), 15);
  EXPECT_DOUBLE_EQ(ShareS(60, 2, 4), 30);
  EXPECT_DOUBLE_EQ(ShareS(30, 2, 2), 30);  // the last run gets all that is left
}

TEST(ShareS, NeverMoreThanWhatIsLeftNorBelowZero) {
  EXPECT_DOUBLE_EQ(ShareS(10, 3, 2), 10);
  EXPECT_EQ(ShareS(-5, 1, 2), 0);
  EXPECT_EQ(ShareS(10, 1, 0), 0);
}

}  // namespace
}  // namespace titan::gpu_proof
