// lst: Lenstra-Shmoys-Tardos rounding, a 2-approximation.
//
// LST searches for the least target T whose LP, with every job barred from machines on which
// it takes longer than T, is feasible. In LBDC a switch costs w_s on each of its potential
// controllers, so for T < max_s w_s the heaviest switch is barred everywhere (infeasible) and for
// T >= max_s w_s nothing is barred: the search collapses to T = max(LP*, max_s w_s), one LP.
// CLP's simplex gives an extreme point whose support, on the fractional switches, is a
// pseudo-forest; so those switches match to distinct controllers of their support. Each
// controller then carries its integral share (<= LP* <= T) plus at most one fractional switch
// (<= max_s w_s <= T): at most 2T, and T <= OPT is the reported lower bound.
#include <algorithm>
#include <functional>

#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/lp_model.h"
#include "plugins/balance/common/solver_policy.h"

namespace titan::balance {
namespace {

// Matches every fractional switch to a distinct controller carrying part of it (augmenting
// paths); a switch left unmatched keeps -1.
std::vector<int32_t> MatchFractional(const std::vector<int>& fractional,
                                     const std::vector<std::vector<int32_t>>& support,
                                     int num_controllers) {
  std::vector<int> owner(num_controllers, -1);  // index into `fractional`
  std::vector<int> visited(num_controllers, -1);
  std::function<bool(int, int)> augment = [&](int i, int stamp) {
    for (int32_t c : support[i]) {
      if (visited[c] == stamp) continue;
      visited[c] = stamp;
      if (owner[c] < 0 || augment(owner[c], stamp)) {
        owner[c] = i;
        return true;
      }
    }
    return false;
  };
  for (int i = 0; i < static_cast<int>(fractional.size()); ++i) augment(i, i);
  std::vector<int32_t> matched(fractional.size(), -1);
  for (int c = 0; c < num_controllers; ++c) {
    if (owner[c] >= 0) matched[owner[c]] = c;
  }
  return matched;
}

}  // namespace

class Lst : public SolverPolicy {
 public:
  absl::StatusOr<BalanceResult> Assign(const BalanceProblem& problem) override {
    TITAN_RETURN_IF_ERROR(ValidateProblem(problem));
    TITAN_ASSIGN_OR_RETURN(FractionalAssignment lp, SolveRelaxation(problem, solver_log()));
    const double heaviest =
        *std::max_element(problem.switch_load.begin(), problem.switch_load.end());
    BalanceResult result;
    result.controller_of = Round(problem, lp);
    for (int s = 0; s < problem.num_switches(); ++s) {
      if (*std::max_element(lp.x[s].begin(), lp.x[s].end()) < 1.0 - kIntegralTolerance) {
        result.largest_fractional_load =
            std::max(result.largest_fractional_load, problem.switch_load[s]);
      }
    }
    result.fractional_bound = std::max(lp.objective, heaviest);
    result.lower_bound = std::max(result.fractional_bound, TrivialLowerBound(problem));
    return result;
  }

 protected:
  // Integral switches where x puts them; fractional ones matched to distinct controllers of
  // their support.
  std::vector<int32_t> Round(const BalanceProblem& problem,
                             const FractionalAssignment& lp) const override {
    std::vector<int32_t> controller_of(problem.num_switches(), -1);
    std::vector<int> fractional;
    std::vector<std::vector<int32_t>> support;
    for (int s = 0; s < problem.num_switches(); ++s) {
      const std::vector<double>& x = lp.x[s];
      const size_t best = std::max_element(x.begin(), x.end()) - x.begin();
      if (x[best] >= 1.0 - kIntegralTolerance) {
        controller_of[s] = problem.potential[s][best];
        continue;
      }
      fractional.push_back(s);
      support.emplace_back();
      for (size_t i = 0; i < x.size(); ++i) {
        if (x[i] > kIntegralTolerance) support.back().push_back(problem.potential[s][i]);
      }
    }
    const std::vector<int32_t> matched =
        MatchFractional(fractional, support, problem.num_controllers());
    for (size_t i = 0; i < fractional.size(); ++i) {
      // Unmatched only if the solver's point was not extreme; its largest share is still valid.
      controller_of[fractional[i]] = matched[i] >= 0 ? matched[i] : support[i].front();
    }
    return controller_of;
  }
};

}  // namespace titan::balance

TITAN_PLUGIN(titan::BalancePlugin, titan::balance::Lst, "lst", "1.0.0",
             "Lenstra-Shmoys-Tardos LP rounding: at most 2T with T <= OPT")
