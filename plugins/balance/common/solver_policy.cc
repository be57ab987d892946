#include "plugins/balance/common/solver_policy.h"

#include <algorithm>
#include <cmath>

#include "plugins/balance/common/hot_region.h"

namespace titan::balance {
std::vector<int32_t> SolverPolicy::Round(const BalanceProblem& problem,
                                         const FractionalAssignment& lp) const {
  return LargestShare(problem, lp);
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

  TITAN_RETURN_IF_ERROR(ResolveHotRegion(
      state, result.target, goal.max_moves,
      [this](const BalanceProblem& part, const FractionalAssignment& lp) {
        return Round(part, lp);
      },
      solver_log()));
  result.moves = std::move(state.moves);
  return result;
}

}  // namespace titan::balance
