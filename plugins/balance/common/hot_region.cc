#include "plugins/balance/common/hot_region.h"

#include <algorithm>

#include "plugins/balance/common/instance.h"

namespace titan::balance {
namespace {

// The instance restricted to `switches` (same controllers and capacities).
BalanceProblem Restrict(const BalanceProblem& problem, const std::vector<int32_t>& switches) {
  BalanceProblem part;
  part.controller_capacity = problem.controller_capacity;
  for (int32_t s : switches) {
    part.switch_load.push_back(problem.switch_load[s]);
    part.potential.push_back(problem.potential[s]);
  }
  return part;
}

// `switches` plus every switch on a controller that one of them may use.
std::vector<int32_t> Widen(const Rebalancing& state, const std::vector<int32_t>& switches) {
  const BalanceProblem& problem = state.problem;
  std::vector<char> reachable(problem.num_controllers(), 0);
  for (int32_t s : switches) {
    for (int32_t c : problem.potential[s]) reachable[c] = 1;
  }
  std::vector<int32_t> wider;
  for (int s = 0; s < problem.num_switches(); ++s) {
    if (reachable[state.assignment[s]]) wider.push_back(s);
  }
  return wider;
}

}  // namespace

std::vector<int32_t> LargestShare(const BalanceProblem& problem, const FractionalAssignment& lp) {
  std::vector<int32_t> controller_of(problem.num_switches());
  for (int s = 0; s < problem.num_switches(); ++s) {
    const std::vector<double>& x = lp.x[s];
    controller_of[s] = problem.potential[s][std::max_element(x.begin(), x.end()) - x.begin()];
  }
  return controller_of;
}

absl::Status ResolveHotRegion(Rebalancing& state, double target, int64_t max_moves,
                              const LpRounding& round, int log_level) {
  const BalanceProblem& problem = state.problem;
  std::vector<int32_t> free = SwitchesAbove(state, target);
  if (free.empty()) return absl::OkStatus();
  FractionalAssignment migration;
  for (int attempt = 0; attempt < 2; ++attempt) {
    TITAN_ASSIGN_OR_RETURN(migration,
                           SolveMigration(problem, state.assignment, free, target, log_level));
    if (migration.objective <= LoadTolerance(problem) || attempt == 1) break;
    free = Widen(state, free);
  }
  const std::vector<int32_t> rounded = round(Restrict(problem, free), migration);
  std::vector<Migration> proposed;
  for (size_t i = 0; i < free.size(); ++i) {
    const int32_t s = free[i];
    if (rounded[i] != state.assignment[s]) proposed.push_back({s, state.assignment[s], rounded[i]});
  }
  ApplyImproving(state, proposed, max_moves - static_cast<int64_t>(state.moves.size()));
  ReachTarget(state, target, max_moves);
  return absl::OkStatus();
}

absl::Status ReachTargetOrResolve(Rebalancing& state, double target, int64_t max_moves) {
  ReachTarget(state, target, max_moves);
  if (state.MaxLoad() <= target + LoadTolerance(state.problem)) return absl::OkStatus();
  return ResolveHotRegion(state, target, max_moves, LargestShare, /*log_level=*/0);
}

}  // namespace titan::balance
