// What the LP policies (lp-round, lst) share, and ilp its log key: the solver's log level as a
// recipe key, and re-balancing with the current assignment in the model. Rebalance moves
// nothing when the current maximum is within slack x the densest-set bound (common/flow_bound.h,
// LP* by max flow; the LP relaxation is solved for the bound only when controllers have
// capacities, which the flow does not see); else it re-solves the hot region
// (common/hot_region.h), rounds that as the policy rounds, and makes the rounded moves that
// still help; single moves and chains (common/rebalance.h) then close what rounding left above
// the target.
#ifndef TITAN_PLUGINS_BALANCE_COMMON_SOLVER_POLICY_H_
#define TITAN_PLUGINS_BALANCE_COMMON_SOLVER_POLICY_H_

#include <vector>

#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/lp_model.h"
#include "titan/balance.h"

namespace titan::balance {

class SolverPolicy : public BalancePlugin {
 public:
  std::vector<ConfigKey> ConfigKeys() const override {
    return {ConfigKey{"solver_log",
                      ConfigType::kInt,
                      ConfigValue(int64_t{0}),
                      "COIN-OR solver log level, 0 (silent) to 4",
                      0.0,
                      4.0,
                      {}}};
  }

  absl::Status Configure(const ConfigView& config) override {
    TITAN_ASSIGN_OR_RETURN(int64_t level, config.GetInt("solver_log"));
    solver_log_ = static_cast<int>(level);
    return absl::OkStatus();
  }

  absl::StatusOr<RebalanceResult> Rebalance(const BalanceProblem& problem,
                                            const std::vector<int32_t>& current,
                                            const RebalanceGoal& goal) override;

 protected:
  int solver_log() const { return solver_log_; }

  // The policy's rounding of a basic solution `lp` of `problem`'s relaxation (or of the
  // migration LP, whose x has the same form); by default each switch to its largest share.
  virtual std::vector<int32_t> Round(const BalanceProblem& problem,
                                     const FractionalAssignment& lp) const;

 private:
  int solver_log_ = 0;
};

}  // namespace titan::balance

#endif  // TITAN_PLUGINS_BALANCE_COMMON_SOLVER_POLICY_H_
