#include "core/runtime/control_plane/balancer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/runtime/plugin_registry.h"

namespace titan {

std::vector<double> ControllerLoads(const BalanceProblem& problem,
                                    const std::vector<int32_t>& controller_of) {
  std::vector<double> loads(problem.num_controllers(), 0.0);
  for (int s = 0; s < problem.num_switches(); ++s)
    loads[controller_of[s]] += problem.switch_load[s];
  return loads;
}

namespace {

// `problem` with the lost controllers out of every potential set.
absl::StatusOr<BalanceProblem> WithoutLost(const BalanceProblem& problem,
                                           const std::vector<bool>& lost) {
  BalanceProblem live = problem;
  for (int s = 0; s < live.num_switches(); ++s) {
    std::vector<int32_t> potential;
    std::vector<double> distance;
    for (size_t i = 0; i < problem.potential[s].size(); ++i) {
      if (lost[problem.potential[s][i]]) continue;
      potential.push_back(problem.potential[s][i]);
      distance.push_back(problem.distance[s][i]);
    }
    if (potential.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", s, " has no live controller within control_plane.hops; it stays unwatched"));
    }
    live.potential[s] = std::move(potential);
    live.distance[s] = std::move(distance);
  }
  return live;
}

}  // namespace

absl::StatusOr<Balanced> AssignControllers(BalancePlugin& policy, const BalanceProblem& problem,
                                           const std::vector<bool>& lost) {
  TITAN_ASSIGN_OR_RETURN(BalanceProblem live, WithoutLost(problem, lost));
  TITAN_ASSIGN_OR_RETURN(BalanceResult result,
                         CallPluginOf(policy, "Assign", [&] { return policy.Assign(live); }));
  return Balanced{std::move(result.controller_of), result.lower_bound, true};
}

absl::StatusOr<Balanced> RebalanceControllers(BalancePlugin& policy, const BalanceProblem& problem,
                                              const std::vector<int32_t>& current,
                                              const std::vector<bool>& lost) {
  TITAN_ASSIGN_OR_RETURN(BalanceProblem live, WithoutLost(problem, lost));
  // Orphans, heaviest first, to the least-loaded live controller they may use.
  std::vector<int32_t> next = current;
  std::vector<int> orphans;
  for (int s = 0; s < live.num_switches(); ++s) {
    if (lost[next[s]]) orphans.push_back(s);
  }
  std::stable_sort(orphans.begin(), orphans.end(),
                   [&](int a, int b) { return live.switch_load[a] > live.switch_load[b]; });
  std::vector<double> loads(live.num_controllers(), 0.0);
  for (int s = 0; s < live.num_switches(); ++s) {
    if (!lost[next[s]]) loads[next[s]] += live.switch_load[s];
  }
  for (int s : orphans) {
    int32_t best = live.potential[s].front();
    for (int32_t c : live.potential[s]) {
      if (loads[c] < loads[best]) best = c;
    }
    next[s] = best;
    loads[best] += live.switch_load[s];
  }
  double total = 0, heaviest = 0;
  for (double w : live.switch_load) total += w, heaviest = std::max(heaviest, w);
  const auto alive = std::count(lost.begin(), lost.end(), false);
  // The policy moves as few workers as it can to bring the most loaded controller within 2% of
  // the best lower bound (the trivial one, or better if the policy proves one).
  RebalanceGoal goal;
  goal.lower_bound = std::max(heaviest, total / static_cast<double>(alive));
  TITAN_ASSIGN_OR_RETURN(RebalanceResult result, CallPluginOf(policy, "Rebalance", [&] {
                           return policy.Rebalance(live, next, goal);
                         }));
  for (const Migration& move : result.moves) next[move.switch_index] = move.to;
  return Balanced{std::move(next), std::max(goal.lower_bound, result.lower_bound), false};
}

}  // namespace titan
