// regions: the static baseline. Each switch goes to its nearest potential controller (ties to
// the one listed first), whatever the loads; this is what a fixed partition of the topology
// into controller regions does, and the reference the balancing policies are measured against.
#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/rebalance.h"

namespace titan::balance {

class Regions : public BalancePlugin {
 public:
  absl::StatusOr<BalanceResult> Assign(const BalanceProblem& problem) override {
    TITAN_RETURN_IF_ERROR(ValidateProblem(problem));
    BalanceResult result;
    result.controller_of = NearestControllers(problem);
    result.lower_bound = TrivialLowerBound(problem);
    return result;
  }

  // Loads do not move regions, so the target does not either: the switches away from their
  // nearest controller go back, at most goal.max_moves of them (in switch order).
  absl::StatusOr<RebalanceResult> Rebalance(const BalanceProblem& problem,
                                            const std::vector<int32_t>& current,
                                            const RebalanceGoal& goal) override {
    TITAN_ASSIGN_OR_RETURN(BalanceResult nearest, Assign(problem));
    TITAN_RETURN_IF_ERROR(ValidateAssignment(problem, current));
    RebalanceResult result;
    TITAN_ASSIGN_OR_RETURN(result.lower_bound, GoalBound(goal, nearest.lower_bound));
    result.target = goal.slack * result.lower_bound;
    result.moves = Diff(current, nearest.controller_of);
    if (static_cast<int64_t>(result.moves.size()) > goal.max_moves) {
      result.moves.resize(static_cast<size_t>(goal.max_moves));
    }
    return result;
  }
};

}  // namespace titan::balance

TITAN_PLUGIN(titan::BalancePlugin, titan::balance::Regions, "regions", "1.0.0",
             "static baseline: every switch to its nearest controller")
