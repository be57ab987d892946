// Issue 40: the densest-set bound is LP* to 0.1% (a valid lower bound, reachable under a hotspot
// where the trivial one is not); re-balancing after a change of drift 1 meets both targets (at
// most 5% of the switches moved, a maximum within 1.02 of the bound) and under a regional
// hotspot the ratio, on instances of the 100k x 1,000 benchmark's density (100 switches per
// controller) small enough for CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "plugins/balance/common/flow_bound.h"
#include "plugins/balance/common/instance.h"
#include "plugins/balance/policy_test_support.h"

namespace titan::balance {
namespace {

TEST(DensestSetBound, IsLpStarToAThousandthAndBelowTheOptimumOnRandomInstances) {
  std::mt19937 random(40);
  auto lp_round = Make("lp-round");
  auto ilp = Make("ilp");
  for (int trial = 0; trial < 200; ++trial) {
    SCOPED_TRACE(::testing::Message() << "instance " << trial);
    const BalanceProblem problem = RandomProblem(random);
    const PotentialSetBound flow = DensestSetBound(problem, NearestControllers(problem));
    auto lp = lp_round->Assign(problem);
    auto optimum = ilp->Assign(problem);
    ASSERT_TRUE(lp.ok() && optimum.ok());
    const double heaviest =
        *std::max_element(problem.switch_load.begin(), problem.switch_load.end());
    const double scale = std::max(1.0, flow.bound);
    const double lp_star = std::max(lp->fractional_bound, heaviest);
    EXPECT_LE(flow.bound, lp_star + 1e-6 * scale);  // pushed 0.1% above each target
    EXPECT_GE(flow.bound, lp_star / (1 + 1e-3) - 1e-6 * scale);
    EXPECT_LE(flow.bound, MaxLoad(problem, optimum->controller_of) + 1e-9 * scale);
    // The bound is the density of the set it names (or the heaviest switch).
    if (flow.bound > heaviest) {
      EXPECT_NEAR(SetDensity(problem, flow.densest), flow.bound, 1e-12 * scale);
    }
  }
}

TEST(DensestSetBound, IsAHotRegionsDensity) {
  // Controllers 0 and 1 alone watch 10 units; 2 and 3 share 2 more. The trivial bound is
  // 12 / 4 = 3; no assignment does better than 5.
  const BalanceProblem problem{{4, 3, 3, 1, 1},
                               std::vector<double>(4, INFINITY),
                               {{0, 1}, {0, 1}, {1, 0}, {2, 3}, {3, 2}},
                               {}};
  const PotentialSetBound flow = DensestSetBound(problem, {0, 0, 0, 2, 2});
  EXPECT_DOUBLE_EQ(flow.bound, 5.0);
  EXPECT_EQ(flow.densest, (std::vector<int32_t>{0, 1}));
  EXPECT_DOUBLE_EQ(TrivialLowerBound(problem), 4.0);  // the heaviest switch
}

// n switches and m controllers at random points of the unit square; each switch may use its f
// nearest controllers, as titan-lbdc's Waxman instances with --max-potential=f.
struct Plane {
  BalanceProblem problem;
  std::vector<std::pair<double, double>> at;  // switch positions
};

Plane RandomPlane(int n, int m, int f, std::mt19937& random) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<std::pair<double, double>> sites(m);
  for (auto& site : sites) site = {unit(random), unit(random)};
  Plane plane;
  plane.problem.controller_capacity.assign(m, INFINITY);
  std::vector<int32_t> order(m);
  for (int s = 0; s < n; ++s) {
    const std::pair<double, double> p = {unit(random), unit(random)};
    plane.at.push_back(p);
    std::iota(order.begin(), order.end(), 0);
    auto distance = [&](int32_t c) {
      return std::hypot(sites[c].first - p.first, sites[c].second - p.second);
    };
    std::partial_sort(order.begin(), order.begin() + f, order.end(),
                      [&](int32_t a, int32_t b) { return distance(a) < distance(b); });
    plane.problem.potential.emplace_back(order.begin(), order.begin() + f);
    plane.problem.switch_load.push_back(std::uniform_real_distribution<double>(1, 100)(random));
  }
  return plane;
}

// The loads of the `fraction` of switches nearest a random point times `factor`, the total
// kept (titan-lbdc --hotspot).
void Heat(Plane& plane, double fraction, double factor, std::mt19937& random) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::pair<double, double> centre = {unit(random), unit(random)};
  const int n = plane.problem.num_switches();
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto distance = [&](int32_t s) {
    return std::hypot(plane.at[s].first - centre.first, plane.at[s].second - centre.second);
  };
  const int hot = static_cast<int>(fraction * n);
  std::partial_sort(order.begin(), order.begin() + hot, order.end(),
                    [&](int32_t a, int32_t b) { return distance(a) < distance(b); });
  std::vector<double>& w = plane.problem.switch_load;
  const double before = std::accumulate(w.begin(), w.end(), 0.0);
  for (int i = 0; i < hot; ++i) w[order[i]] *= factor;
  const double after = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& load : w) load *= before / after;
}

// Each of `policies` re-balances greedy's assignment of the loads before the change: its
// maximum is within 1.02 of the densest-set bound (LP*), which it reports, and, when
// `max_moved` > 0, at most that share of the switches move.
void ExpectTargetsMet(const BalanceProblem& before, const BalanceProblem& after,
                      const std::vector<std::string>& policies, double max_moved) {
  auto start = Make("greedy")->Assign(before);
  ASSERT_TRUE(start.ok());
  const double bound = DensestSetBound(after, start->controller_of).bound;
  for (const std::string& name : policies) {
    SCOPED_TRACE(name);
    auto result = Make(name)->Rebalance(after, start->controller_of, RebalanceGoal{});
    ASSERT_TRUE(result.ok()) << result.status();
    std::vector<int32_t> assignment = start->controller_of;
    for (const Migration& move : result->moves) assignment[move.switch_index] = move.to;
    if (max_moved > 0) {
      EXPECT_LE(Diff(start->controller_of, assignment).size(), max_moved * after.num_switches());
    }
    EXPECT_LE(MaxLoad(after, assignment), 1.02 * bound * (1 + 1e-9));
    EXPECT_NEAR(result->lower_bound, bound, 1e-9 * bound);
  }
}

TEST(RebalanceTargets, MetAfterADriftOfOne) {
  std::mt19937 random(401);
  const Plane plane = RandomPlane(4000, 40, 8, random);
  BalanceProblem after = plane.problem;
  for (double& w : after.switch_load) w *= std::uniform_real_distribution<double>(0, 2)(random);
  ExpectTargetsMet(plane.problem, after, {"greedy", "distributed", "lp-round", "lst"}, 0.05);
}

// Under a hotspot every policy ends within 1.02 of the bound, the hot region's density. The 5%
// of switches moved is not asserted, because not met here: the hot region is 4 controllers'
// worth, most of its load must spread, and 13-19% of the switches move (at 100k x 1,000, where
// it is 70 controllers' worth, 3.2-3.7% with x10 and 6-7% with x2: docs/benchmarks.md).
TEST(RebalanceTargets, RatioMetUnderARegionalHotspot) {
  for (double factor : {5.0, 10.0}) {
    SCOPED_TRACE(::testing::Message() << "x" << factor);
    std::mt19937 random(402);
    Plane plane = RandomPlane(6000, 60, 8, random);
    const BalanceProblem before = plane.problem;
    Heat(plane, 0.07, factor, random);
    // The hot region is denser than the network: the trivial bound cannot be reached.
    EXPECT_GT(DensestSetBound(plane.problem, NearestControllers(plane.problem)).bound,
              1.02 * TrivialLowerBound(plane.problem));
    ExpectTargetsMet(before, plane.problem, {"greedy", "distributed", "lp-round", "lst"}, 0.0);
  }
}

}  // namespace
}  // namespace titan::balance
