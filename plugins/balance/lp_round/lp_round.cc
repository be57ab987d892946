// lp-round: solve the LP relaxation (common/lp_model.h) and send every switch to the controller
// with its largest x. That x is at least 1/|P(s)| >= 1/f, so each controller carries at most f
// times its fractional load: an f-approximation, with LP* reported as the lower bound.
#include <algorithm>

#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/lp_model.h"
#include "plugins/balance/common/solver_policy.h"

namespace titan::balance {

class LpRound : public SolverPolicy {
 public:
  absl::StatusOr<BalanceResult> Assign(const BalanceProblem& problem) override {
    TITAN_RETURN_IF_ERROR(ValidateProblem(problem));
    TITAN_ASSIGN_OR_RETURN(FractionalAssignment lp, SolveRelaxation(problem, solver_log()));
    BalanceResult result;
    result.controller_of = Round(problem, lp);
    for (int s = 0; s < problem.num_switches(); ++s) {
      if (*std::max_element(lp.x[s].begin(), lp.x[s].end()) < 1.0 - kIntegralTolerance) {
        result.largest_fractional_load =
            std::max(result.largest_fractional_load, problem.switch_load[s]);
      }
    }
    result.fractional_bound = lp.objective;
    result.lower_bound = std::max(lp.objective, TrivialLowerBound(problem));
    return result;
  }
};

}  // namespace titan::balance

TITAN_PLUGIN(titan::BalancePlugin, titan::balance::LpRound, "lp-round", "1.0.0",
             "LP relaxation (CLP) rounded to each switch's largest share: an f-approximation")
