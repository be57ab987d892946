// Issue 40: the lower bound on the migrations any assignment needs to reach a re-balancing
// target (common/lp_model.h, BoundFewestMoves), which titan-lbdc --fewest-moves-bound reports
// next to what each policy moved: never above the exact fewest moves, and a proof when it says
// no assignment reaches the target.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "plugins/balance/common/flow_bound.h"
#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/lp_model.h"

namespace titan::balance {
namespace {

constexpr int kNone = std::numeric_limits<int>::max();

// The fewest switches off `current` among all assignments with every load <= target, by
// enumeration (kNone when none has).
int ExactFewestMoves(const BalanceProblem& problem, const std::vector<int32_t>& current,
                     double target) {
  const int n = problem.num_switches();
  std::vector<size_t> choice(n, 0);
  int fewest = kNone;
  for (;;) {
    std::vector<double> loads(problem.num_controllers(), 0.0);
    int moves = 0;
    for (int s = 0; s < n; ++s) {
      const int32_t c = problem.potential[s][choice[s]];
      loads[c] += problem.switch_load[s];
      moves += c != current[s];
    }
    if (*std::max_element(loads.begin(), loads.end()) <= target + 1e-9) {
      fewest = std::min(fewest, moves);
    }
    int s = 0;
    while (s < n && ++choice[s] == problem.potential[s].size()) choice[s++] = 0;
    if (s == n) return fewest;
  }
}

// Up to 9 switches on up to 4 controllers, up to 3 potential controllers each, integer loads.
BalanceProblem SmallProblem(std::mt19937& random) {
  const int m = std::uniform_int_distribution<int>(2, 4)(random);
  const int n = std::uniform_int_distribution<int>(2, 9)(random);
  BalanceProblem problem;
  problem.controller_capacity.assign(m, INFINITY);
  std::vector<int32_t> controllers(m);
  std::iota(controllers.begin(), controllers.end(), 0);
  for (int s = 0; s < n; ++s) {
    problem.switch_load.push_back(std::uniform_int_distribution<int>(1, 9)(random));
    std::shuffle(controllers.begin(), controllers.end(), random);
    const int f = std::uniform_int_distribution<int>(1, std::min(m, 3))(random);
    problem.potential.emplace_back(controllers.begin(), controllers.begin() + f);
  }
  return problem;
}

TEST(FewestMovesBound, IsAtMostTheExactFewestMovesAndProvesOnlyWhatIsUnreachable) {
  std::mt19937 random(40);
  int tight = 0, proven_unreachable = 0;
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE(::testing::Message() << "instance " << trial);
    const BalanceProblem problem = SmallProblem(random);
    std::vector<int32_t> current;
    for (const auto& p : problem.potential) current.push_back(p[random() % p.size()]);
    const double slack = std::vector<double>{1.0, 1.02, 1.1}[trial % 3];
    const double target = slack * DensestSetBound(problem, current).bound;
    auto bound = BoundFewestMoves(problem, current, target, 0);
    ASSERT_TRUE(bound.ok()) << bound.status();
    const int exact = ExactFewestMoves(problem, current, target);
    if (!bound->reachable) {
      EXPECT_EQ(exact, kNone);
      ++proven_unreachable;
    } else if (exact != kNone) {
      EXPECT_LE(bound->moves, exact);
      tight += bound->moves == exact && exact > 0;
    }
  }
  // Not vacuous: many bounds are exact, and some targets are proven out of reach.
  EXPECT_GT(tight, 50);
  EXPECT_GT(proven_unreachable, 5);
}

TEST(FewestMovesBound, CountsAMoveForEveryControllerAboveTheTarget) {
  // Controllers 0 and 1 carry 21 each, 1 over the target 20; controller 2 is empty. Moving a
  // tenth of a switch off each clears the relaxation, but each must lose a whole one: 2 moves.
  const BalanceProblem problem{
      {10, 11, 10, 11}, std::vector<double>(3, INFINITY), {{0, 2}, {0, 2}, {1, 2}, {1, 2}}, {}};
  auto bound = BoundFewestMoves(problem, {0, 0, 1, 1}, 20.0, 0);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_TRUE(bound->reachable);
  EXPECT_EQ(bound->controllers_above, 2);
  EXPECT_EQ(bound->moves, 2);
  EXPECT_EQ(ExactFewestMoves(problem, {0, 0, 1, 1}, 20.0), 2);
}

TEST(FewestMovesBound, ProvesATargetBetweenLpStarAndTheOptimumUnreachable) {
  // Loads 4, 3, 3 on two controllers: LP* = 5, the optimum 6 ({4}, {3, 3}). At 5.5 the
  // relaxation alone is feasible, but controller 0 (10 now) must shed two whole switches and
  // keep 4.5 of load with the one left: no assignment reaches it.
  const BalanceProblem problem{
      {4, 3, 3}, std::vector<double>(2, INFINITY), {{0, 1}, {0, 1}, {0, 1}}, {}};
  auto bound = BoundFewestMoves(problem, {0, 0, 0}, 5.5, 0);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_FALSE(bound->reachable);
  EXPECT_EQ(ExactFewestMoves(problem, {0, 0, 0}, 5.5), kNone);
  auto at_optimum = BoundFewestMoves(problem, {0, 0, 0}, 6.0, 0);
  ASSERT_TRUE(at_optimum.ok()) << at_optimum.status();
  EXPECT_TRUE(at_optimum->reachable);
  EXPECT_EQ(at_optimum->moves, 1);  // the 4 leaves
  EXPECT_EQ(ExactFewestMoves(problem, {0, 0, 0}, 6.0), 1);
}

TEST(FewestMovesBound, IsZeroWhenNothingIsAboveTheTarget) {
  const BalanceProblem problem{{4, 3}, std::vector<double>(2, INFINITY), {{0, 1}, {0, 1}}, {}};
  auto bound = BoundFewestMoves(problem, {0, 1}, 4.0, 0);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_TRUE(bound->reachable);
  EXPECT_EQ(bound->moves, 0);
  EXPECT_EQ(bound->controllers_above, 0);
  // Below 0 every loaded controller must shed all its switches, and still none gets there.
  auto negative = BoundFewestMoves(problem, {0, 1}, -1.0, 0);
  ASSERT_TRUE(negative.ok()) << negative.status();
  EXPECT_FALSE(negative->reachable);
}

}  // namespace
}  // namespace titan::balance
