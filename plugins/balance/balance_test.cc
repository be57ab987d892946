// Every balance policy, loaded as a plugin, on hundreds of small random instances: valid
// assignments, each policy's guarantee, the exact optimum below all of them, and clear errors
// for bad instances.
#include "titan/balance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/local_search.h"
#include "plugins/balance/policy_test_support.h"

namespace titan::balance {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kPolicies = {"greedy",   "regions", "distributed",
                                            "lp-round", "lst",     "ilp"};

constexpr double kSlack = 1e-6;

TEST(BalancePolicies, MeetTheirGuaranteesOnRandomInstances) {
  std::map<std::string, std::unique_ptr<BalancePlugin>> policies;
  for (const std::string& name : kPolicies) policies[name] = Make(name);
  std::mt19937 random(8);
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE(::testing::Message() << "instance " << trial);
    const BalanceProblem problem = RandomProblem(random);
    std::map<std::string, BalanceResult> results;
    for (const std::string& name : kPolicies) {
      auto result = policies[name]->Assign(problem);
      ASSERT_TRUE(result.ok()) << name << ": " << result.status();
      ASSERT_TRUE(ValidateAssignment(problem, result->controller_of).ok()) << name;
      results[name] = *std::move(result);
    }
    const double optimum = MaxLoad(problem, results["ilp"].controller_of);
    EXPECT_TRUE(ProvenOptimal(optimum, results["ilp"].lower_bound));
    const double f = MaxPotential(problem);
    for (const auto& [name, result] : results) {
      const double load = MaxLoad(problem, result.controller_of);
      EXPECT_LE(optimum, load + kSlack) << name;
      EXPECT_LE(result.lower_bound, optimum + kSlack) << name;
    }
    const BalanceResult& lp = results["lp-round"];
    EXPECT_LE(MaxLoad(problem, lp.controller_of), f * lp.fractional_bound + kSlack);
    const BalanceResult& lst = results["lst"];
    const double lst_load = MaxLoad(problem, lst.controller_of);
    EXPECT_LE(lst_load, 2 * lst.fractional_bound + kSlack);
    EXPECT_LE(lst_load, lst.fractional_bound + lst.largest_fractional_load + kSlack);
    EXPECT_LE(lst.fractional_bound, optimum + kSlack);
    for (const char* name : {"greedy", "distributed"}) {
      EXPECT_EQ(FindImprovingMove(problem, results[name].controller_of), std::nullopt) << name;
    }
  }
}

TEST(BalancePolicies, LpRoundingBoundsAreTightOnAKnownInstance) {
  // Two controllers, three unit switches each free to go anywhere: LP* = 1.5, OPT = 2.
  BalanceProblem problem{{1, 1, 1}, {INFINITY, INFINITY}, {{0, 1}, {0, 1}, {0, 1}}, {}};
  auto lp = Make("lp-round")->Assign(problem);
  ASSERT_TRUE(lp.ok()) << lp.status();
  EXPECT_NEAR(lp->fractional_bound, 1.5, 1e-9);
  auto lst = Make("lst")->Assign(problem);
  ASSERT_TRUE(lst.ok()) << lst.status();
  EXPECT_NEAR(lst->fractional_bound, 1.5, 1e-9);  // T = max(LP*, max w)
  EXPECT_NEAR(MaxLoad(problem, lst->controller_of), 2.0, 1e-9);
  auto ilp = Make("ilp")->Assign(problem);
  ASSERT_TRUE(ilp.ok()) << ilp.status();
  EXPECT_NEAR(ilp->lower_bound, 2.0, 1e-9);
}

TEST(BalancePolicies, IlpStopsAtGreedyWhenGreedyMeetsTheBound) {
  // Loads 1..6 on three free controllers: LPT reaches the average, 7, so it is optimal.
  BalanceProblem problem{{1, 2, 3, 4, 5, 6}, {INFINITY, INFINITY, INFINITY}, {}, {}};
  problem.potential.assign(6, {0, 1, 2});
  auto ilp = Make("ilp")->Assign(problem);
  ASSERT_TRUE(ilp.ok()) << ilp.status();
  EXPECT_NEAR(MaxLoad(problem, ilp->controller_of), 7.0, 1e-9);
  EXPECT_NEAR(ilp->lower_bound, 7.0, 1e-9);  // proven optimal
}

TEST(BalancePolicies, IlpFinishesOnASymmetricInstance) {
  // A fat-tree k=4 (20 switches) with 3 controllers all within reach of every switch and real
  // loads: identical controllers make CBC's proof take hours, so the time limit must end it
  // with a valid assignment, no worse than greedy's, and a lower bound below it.
  std::mt19937 random(4);
  BalanceProblem problem;
  problem.controller_capacity.assign(3, INFINITY);
  for (int s = 0; s < 20; ++s) {
    problem.switch_load.push_back(std::uniform_real_distribution<double>(1, 100)(random));
    problem.potential.push_back({0, 1, 2});
  }
  auto ilp = Make("ilp", {{"time_limit_s", 0.5}})->Assign(problem);
  ASSERT_TRUE(ilp.ok()) << ilp.status();
  ASSERT_TRUE(ValidateAssignment(problem, ilp->controller_of).ok());
  auto greedy = Make("greedy")->Assign(problem);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  const double load = MaxLoad(problem, ilp->controller_of);
  EXPECT_LE(load, MaxLoad(problem, greedy->controller_of) + kSlack);
  EXPECT_LE(ilp->lower_bound, load + kSlack);
  EXPECT_GE(ilp->lower_bound, TrivialLowerBound(problem) - kSlack);
}

TEST(BalancePolicies, CapacitiesBoundTheLpAndTheOptimum) {
  // Controller 0 may hold at most 1: the heavy switch must go to controller 1.
  BalanceProblem problem{{3, 1}, {1, INFINITY}, {{0, 1}, {0, 1}}, {}};
  for (const char* name : {"lp-round", "lst", "ilp", "greedy"}) {
    auto result = Make(name)->Assign(problem);
    ASSERT_TRUE(result.ok()) << name << ": " << result.status();
    EXPECT_EQ(result->controller_of[0], 1) << name;
  }
  problem.controller_capacity = {1, 1};
  auto lp = Make("lp-round")->Assign(problem);
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kFailedPrecondition);
}

// `moves` made on `current`, checking that each takes its switch from where it is.
std::vector<int32_t> Apply(const std::vector<int32_t>& current,
                           const std::vector<Migration>& moves) {
  std::vector<int32_t> after = current;
  for (const Migration& move : moves) {
    EXPECT_EQ(after[move.switch_index], move.from);
    after[move.switch_index] = move.to;
  }
  return after;
}

// No single move to a controller within `target` lowers controller c: the re-balance ended
// there for want of one.
bool NoMoveLowers(const BalanceProblem& problem, const std::vector<int32_t>& assignment, int c,
                  double target) {
  const std::vector<double> loads = ControllerLoads(problem, assignment);
  for (int s = 0; s < problem.num_switches(); ++s) {
    if (assignment[s] != c || problem.switch_load[s] == 0) continue;  // moving 0 lowers nothing
    for (int32_t b : problem.potential[s]) {
      if (b != c && loads[b] <= target &&
          loads[b] + problem.switch_load[s] < loads[c] - LoadTolerance(problem)) {
        return false;
      }
    }
  }
  return true;
}

const std::vector<std::string> kRebalancing = {"greedy", "distributed", "lp-round", "lst", "ilp"};

TEST(BalancePolicies, RebalanceReachesTheTargetOrCannotLowerWhatIsAbove) {
  std::mt19937 random(88);
  std::map<std::string, std::unique_ptr<BalancePlugin>> policies;
  for (const std::string& name : kRebalancing) policies[name] = Make(name);
  for (int trial = 0; trial < 100; ++trial) {
    SCOPED_TRACE(::testing::Message() << "instance " << trial);
    BalanceProblem problem = RandomProblem(random);
    auto before = policies["greedy"]->Assign(problem);
    ASSERT_TRUE(before.ok());
    for (double& w : problem.switch_load) w *= std::uniform_real_distribution<double>(0, 3)(random);
    const double start = MaxLoad(problem, before->controller_of);
    std::map<std::string, size_t> moves_to_target;
    for (const std::string& name : kRebalancing) {
      auto result = policies[name]->Rebalance(problem, before->controller_of, RebalanceGoal{});
      ASSERT_TRUE(result.ok()) << name << ": " << result.status();
      const std::vector<int32_t> after = Apply(before->controller_of, result->moves);
      ASSERT_TRUE(ValidateAssignment(problem, after).ok()) << name;
      EXPECT_NEAR(result->target, 1.02 * result->lower_bound, 1e-9 * result->target) << name;
      const double load = MaxLoad(problem, after);
      EXPECT_LE(result->lower_bound, load + kSlack) << name;
      EXPECT_LE(load, start + kSlack) << name;  // never worse
      if (start <= result->target + kSlack) {
        EXPECT_TRUE(result->moves.empty()) << name;
      }
      if (load <= result->target + kSlack) {
        moves_to_target[name] = result->moves.size();
      } else {
        EXPECT_NE(name, "ilp");  // the optimum meets any target >= its bound
        const std::vector<double> loads = ControllerLoads(problem, after);
        for (int c = 0; c < problem.num_controllers(); ++c) {
          if (loads[c] > result->target + kSlack && name != "distributed") {
            EXPECT_TRUE(NoMoveLowers(problem, after, c, result->target))
                << name << " controller " << c;
          }
        }
      }
    }
    // ilp's moves are the fewest that reach its target, which is at least as low as the others'.
    for (const auto& [name, moves] : moves_to_target) {
      EXPECT_LE(moves_to_target["ilp"], moves) << name;
    }
  }
}

TEST(BalancePolicies, RebalanceMovesNothingWithinTheTargetAndTheFewestAboveIt) {
  // Controllers hold 5, 3 and 6 unit switches, each free to go anywhere: the average is 4.67
  // and improving moves exist (6 -> 3), but within 1.3 x the bound nothing need move; with
  // slack 1 one move reaches the optimum, 5.
  BalanceProblem problem;
  problem.controller_capacity.assign(3, INFINITY);
  std::vector<int32_t> current;
  for (int c : {0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2}) {
    problem.switch_load.push_back(1.0);
    problem.potential.push_back({0, 1, 2});
    current.push_back(c);
  }
  for (const std::string& name : kRebalancing) {
    auto relaxed = Make(name)->Rebalance(problem, current, RebalanceGoal{1.3});
    ASSERT_TRUE(relaxed.ok()) << name << ": " << relaxed.status();
    EXPECT_TRUE(relaxed->moves.empty()) << name;
    auto tight = Make(name)->Rebalance(problem, current, RebalanceGoal{1.0});
    ASSERT_TRUE(tight.ok()) << name << ": " << tight.status();
    // Agents above the target propose in the same round, so distributed may make one more.
    EXPECT_LE(tight->moves.size(), name == "distributed" ? 2u : 1u) << name;
    EXPECT_NEAR(MaxLoad(problem, Apply(current, tight->moves)), 5.0, 1e-12) << name;
  }
}

TEST(BalancePolicies, RebalanceKeepsToTheBudget) {
  std::mt19937 random(5);
  for (int trial = 0; trial < 30; ++trial) {
    BalanceProblem problem = RandomProblem(random);
    const std::vector<int32_t> nearest = NearestControllers(problem);
    for (const std::string& name : kRebalancing) {
      for (int64_t budget : {0, 1, 2}) {
        auto result = Make(name)->Rebalance(problem, nearest, RebalanceGoal{1.0, 0.0, budget});
        ASSERT_TRUE(result.ok()) << name << ": " << result.status();
        EXPECT_LE(static_cast<int64_t>(result->moves.size()), budget) << name;
        EXPECT_LE(MaxLoad(problem, Apply(nearest, result->moves)),
                  MaxLoad(problem, nearest) + kSlack)
            << name;
      }
    }
  }
}

TEST(BalancePolicies, RebalanceRefusesABadGoal) {
  const BalanceProblem problem{{1, 2}, {INFINITY, INFINITY}, {{0, 1}, {0, 1}}, {}};
  for (const std::string& name : kRebalancing) {
    auto low = Make(name)->Rebalance(problem, {0, 0}, RebalanceGoal{0.9});
    EXPECT_THAT(std::string(low.status().message()), HasSubstr("slack 0.9: expected")) << name;
    auto nan = Make(name)->Rebalance(problem, {0, 0}, RebalanceGoal{1.0, NAN});
    EXPECT_THAT(std::string(nan.status().message()), HasSubstr("lower bound nan")) << name;
    auto negative = Make(name)->Rebalance(problem, {0, 0}, RebalanceGoal{1.0, 0.0, -1});
    EXPECT_THAT(std::string(negative.status().message()), HasSubstr("budget -1")) << name;
  }
}

// The optimum by enumeration, for instances of up to ~10 switches.
double BruteForceOptimum(const BalanceProblem& problem) {
  std::vector<size_t> choice(problem.num_switches(), 0);
  double best = INFINITY;
  while (true) {
    std::vector<int32_t> assignment;
    for (int s = 0; s < problem.num_switches(); ++s) {
      assignment.push_back(problem.potential[s][choice[s]]);
    }
    best = std::min(best, MaxLoad(problem, assignment));
    int s = 0;
    while (s < problem.num_switches() && ++choice[s] == problem.potential[s].size()) {
      choice[s++] = 0;
    }
    if (s == problem.num_switches()) return best;
  }
}

TEST(BalancePolicies, ScaledLoadsGiveTheSameQualityAndVerdicts) {
  // Issue 23: with loads of 1e-4, ilp claimed optimality for an assignment 0.2% above one that
  // exists, because CBC's tolerances are absolute.
  std::map<std::string, std::unique_ptr<BalancePlugin>> policies;
  for (const std::string& name : kPolicies) policies[name] = Make(name);
  std::mt19937 random(23);
  int checked = 0;
  while (checked < 40) {
    BalanceProblem problem = RandomProblem(random);
    if (problem.num_switches() > 10 || MaxPotential(problem) < 2) continue;
    ++checked;
    SCOPED_TRACE(::testing::Message() << "instance " << checked);
    const double optimum = BruteForceOptimum(problem);
    std::map<std::string, double> quality;  // max load / scale at scale 1
    std::map<std::string, bool> verdict;
    for (double scale : {1.0, 1e-6, 1e-4, 1e-3, 1e3, 1e6}) {
      SCOPED_TRACE(::testing::Message() << "scale " << scale);
      const BalanceProblem scaled = ScaledLoads(problem, scale);
      for (const std::string& name : kPolicies) {
        auto result = policies[name]->Assign(scaled);
        ASSERT_TRUE(result.ok()) << name << ": " << result.status();
        const double load = MaxLoad(scaled, result->controller_of) / scale;
        const bool proven = ProvenOptimal(load * scale, result->lower_bound);
        EXPECT_LE(result->lower_bound / scale, optimum * (1 + 1e-9)) << name;
        if (scale == 1.0) {
          quality[name] = load;
          verdict[name] = proven;
        } else {
          EXPECT_NEAR(load, quality[name], 1e-9 * std::max(1.0, quality[name])) << name;
          EXPECT_EQ(proven, verdict[name]) << name;
        }
        if (name == "ilp") {
          EXPECT_TRUE(proven);
          EXPECT_LE(load, optimum * (1 + kOptimalityTolerance));
          EXPECT_LE(load, quality["greedy"] * (1 + 1e-12));  // never worse than its start
        }
      }
    }
  }
}

TEST(BalancePolicies, LoadsWhoseSumOverflowsAreRefused) {
  const BalanceProblem problem{{1e308, 1e308}, {INFINITY, INFINITY}, {{0, 1}, {0, 1}}, {}};
  for (const std::string& name : kPolicies) {
    auto result = Make(name)->Assign(problem);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(std::string(result.status().message()),
                HasSubstr("the loads of switches 0..1 sum beyond the largest double"))
        << name;
  }
}

TEST(BalancePolicies, IlpIsSilentWithSolverLogZero) {
  // The symmetric instance of IlpFinishesOnASymmetricInstance: CBC runs, and printed about 110
  // lines to stdout although solver_log = 0.
  std::mt19937 random(4);
  BalanceProblem problem;
  problem.controller_capacity.assign(3, INFINITY);
  for (int s = 0; s < 20; ++s) {
    problem.switch_load.push_back(std::uniform_real_distribution<double>(1, 100)(random));
    problem.potential.push_back({0, 1, 2});
  }
  auto ilp = Make("ilp", {{"time_limit_s", 0.5}});
  ::testing::internal::CaptureStdout();
  auto result = ilp->Assign(problem);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(printed, "");
}

TEST(BalancePolicies, IlpRefusesATimeLimitThatIsNotFinite) {
  for (double limit : {NAN, INFINITY}) {
    auto plugin = Registry().Create<BalancePlugin>("ilp");
    ASSERT_TRUE(plugin.ok());
    std::map<std::string, ConfigView::Entry> entries = {{"solver_log", {int64_t{0}, "test"}},
                                                        {"time_limit_s", {limit, "test"}}};
    absl::Status status = (*plugin)->Configure(ConfigView("control_plane", entries));
    EXPECT_THAT(std::string(status.message()), HasSubstr("expected a finite number of seconds"));
  }
}

TEST(BalancePolicies, DistributedAnswerDoesNotDependOnThreads) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 30; ++trial) {
    const BalanceProblem problem = RandomProblem(random);
    auto one = Make("distributed", {{"threads", int64_t{1}}})->Assign(problem);
    auto four = Make("distributed", {{"threads", int64_t{4}}})->Assign(problem);
    ASSERT_TRUE(one.ok() && four.ok());
    EXPECT_EQ(one->controller_of, four->controller_of);
    EXPECT_EQ(one->rounds, four->rounds);
    EXPECT_EQ(one->messages, four->messages);
  }
}

TEST(BalancePolicies, DistributedAnswerDoesNotDependOnThreadsOnALargerInstance) {
  // Enough agents that proposers also receive in the same round on several threads: a sender
  // once dropped the switches it had just been handed, depending on thread timing.
  std::mt19937 random(11);
  BalanceProblem problem;
  problem.controller_capacity.assign(60, INFINITY);
  for (int s = 0; s < 3000; ++s) {
    problem.switch_load.push_back(1000.0 / (1 + random() % 3000));  // Zipf-like
    std::vector<int32_t> candidates;
    const int first = static_cast<int>(random() % 60);
    for (int i = 0; i < 4; ++i) candidates.push_back((first + i * 7) % 60);
    problem.potential.push_back(candidates);
  }
  auto one = Make("distributed", {{"threads", int64_t{1}}})->Assign(problem);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(FindImprovingMove(problem, one->controller_of), std::nullopt);
  for (int run = 0; run < 5; ++run) {
    auto four = Make("distributed", {{"threads", int64_t{4}}})->Assign(problem);
    ASSERT_TRUE(four.ok());
    EXPECT_EQ(one->controller_of, four->controller_of);
    EXPECT_EQ(one->rounds, four->rounds);
    EXPECT_EQ(one->messages, four->messages);
  }
}

TEST(BalancePolicies, DistributedCountsRoundsAndMessages) {
  // All four switches start at their nearest controller 0; two must move to controller 1.
  BalanceProblem problem{{1, 1, 1, 1},
                         {INFINITY, INFINITY},
                         {{0, 1}, {0, 1}, {0, 1}, {0, 1}},
                         {{1, 2}, {1, 2}, {1, 2}, {1, 2}}};
  auto result = Make("distributed")->Assign(problem);
  ASSERT_TRUE(result.ok());
  EXPECT_NEAR(MaxLoad(problem, result->controller_of), 2.0, 1e-12);
  EXPECT_GE(result->rounds, 2);  // one that moves, one that finds nothing to propose
  EXPECT_GT(result->messages, 0);
}

TEST(BalancePolicies, RegionsSendsEachSwitchToItsNearestController) {
  BalanceProblem problem{{5, 5}, {INFINITY, INFINITY}, {{0, 1}, {1, 0}}, {{2, 1}, {1, 2}}};
  auto result = Make("regions")->Assign(problem);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->controller_of, (std::vector<int32_t>{1, 1}));
}

TEST(BalancePolicies, BadInstancesGetErrorsNamingTheProblem) {
  const BalanceProblem good{{1, 2}, {INFINITY, INFINITY}, {{0, 1}, {1}}, {}};
  struct Case {
    BalanceProblem problem;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({good, "switch 1 has no potential controller"});
  cases.back().problem.potential[1].clear();
  cases.push_back({good, "switch 0 has load -1"});
  cases.back().problem.switch_load[0] = -1;
  cases.push_back({good, "switch 1 lists controller 5, but the instance has 2 controllers"});
  cases.back().problem.potential[1] = {5};
  cases.push_back({good, "switch 0 lists controller 1 twice"});
  cases.back().problem.potential[0] = {1, 1};
  cases.push_back({good, "controller 1 has capacity 0"});
  cases.back().problem.controller_capacity[1] = 0;
  cases.push_back({good, "the instance has no controllers"});
  cases.back().problem.controller_capacity.clear();
  for (const std::string& name : kPolicies) {
    auto policy = Make(name);
    for (const Case& bad : cases) {
      auto result = policy->Assign(bad.problem);
      EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << name;
      EXPECT_THAT(std::string(result.status().message()), HasSubstr(bad.message)) << name;
    }
    auto moves = policy->Rebalance(good, {0, 0}, RebalanceGoal{});
    EXPECT_THAT(std::string(moves.status().message()),
                HasSubstr("switch 1 is assigned to controller 0, which is not one of its"))
        << name;
  }
}

}  // namespace
}  // namespace titan::balance
