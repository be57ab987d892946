// What the solver-based policies (lp-round, lst, ilp) share: the solver's log level as a
// recipe key, and re-balancing by solving afresh and moving switches only when that lowers
// the maximum load.
#ifndef TITAN_PLUGINS_BALANCE_COMMON_SOLVER_POLICY_H_
#define TITAN_PLUGINS_BALANCE_COMMON_SOLVER_POLICY_H_

#include <vector>

#include "plugins/balance/common/instance.h"
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

  absl::StatusOr<std::vector<Migration>> Rebalance(const BalanceProblem& problem,
                                                   const std::vector<int32_t>& current) override {
    TITAN_ASSIGN_OR_RETURN(BalanceResult fresh, Assign(problem));
    return MigrateIfLower(problem, current, fresh.controller_of);
  }

 protected:
  int solver_log() const { return solver_log_; }

 private:
  int solver_log_ = 0;
};

}  // namespace titan::balance

#endif  // TITAN_PLUGINS_BALANCE_COMMON_SOLVER_POLICY_H_
