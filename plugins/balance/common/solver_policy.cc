#include "plugins/balance/common/solver_policy.h"

#include <algorithm>
#include <cmath>

#include "plugins/balance/common/rebalance.h"

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

std::vector<int32_t> SolverPolicy::Round(const BalanceProblem& problem,
                                         const FractionalAssignment& lp) const {
  std::vector<int32_t> controller_of(problem.num_switches());
  for (int s = 0; s < problem.num_switches(); ++s) {
    const std::vector<double>& x = lp.x[s];
    controller_of[s] = problem.potential[s][std::max_element(x.begin(), x.end()) - x.begin()];
  }
  return controller_of;
}

absl::StatusOr<RebalanceResult> SolverPolicy::Rebalance(const BalanceProblem& problem,
                                                        const std::vector<int32_t>& current,
                                                        const RebalanceGoal& goal) {
  TITAN_RETURN_IF_ERROR(ValidateProblem(problem));
  TITAN_RETURN_IF_ERROR(ValidateAssignment(problem, current));
  TITAN_ASSIGN_OR_RETURN(RebalanceResult result, RebalanceTarget(problem, current, goal));
  Rebalancing state(problem, current);
  if (state.MaxLoad() <= result.target + LoadTolerance(problem)) return result;
  // The densest-set bound is LP* but for capacities, which only the LP sees.
  const bool capacitated =
      std::any_of(problem.controller_capacity.begin(), problem.controller_capacity.end(),
                  [](double capacity) { return std::isfinite(capacity); });
  if (capacitated) {
    TITAN_ASSIGN_OR_RETURN(FractionalAssignment full, SolveRelaxation(problem, solver_log()));
    TITAN_ASSIGN_OR_RETURN(result.lower_bound,
                           GoalBound(goal, std::max(full.objective, result.lower_bound)));
    result.target = goal.slack * result.lower_bound;
    if (state.MaxLoad() <= result.target + LoadTolerance(problem)) return result;
  }

  // The switches on overloaded controllers; once more with their neighbours' switches when the
  // target cannot be met by moving those alone.
  std::vector<int32_t> free = SwitchesAbove(state, result.target);
  FractionalAssignment migration;
  for (int attempt = 0; attempt < 2; ++attempt) {
    TITAN_ASSIGN_OR_RETURN(
        migration, SolveMigration(problem, state.assignment, free, result.target, solver_log()));
    if (migration.objective <= LoadTolerance(problem) || attempt == 1) break;
    free = Widen(state, free);
  }
  const std::vector<int32_t> rounded = Round(Restrict(problem, free), migration);
  std::vector<Migration> proposed;
  for (size_t i = 0; i < free.size(); ++i) {
    const int32_t s = free[i];
    if (rounded[i] != current[s]) proposed.push_back({s, current[s], rounded[i]});
  }
  ApplyImproving(state, proposed, goal.max_moves);
  ReachTarget(state, result.target, goal.max_moves);
  result.moves = std::move(state.moves);
  return result;
}

}  // namespace titan::balance
