// The control plane's one use of a `balance` plugin: the first assignment (Assign) and every
// later one (Rebalance), with lost controllers taken out of the instance.
#ifndef TITAN_CORE_RUNTIME_CONTROL_PLANE_BALANCER_H_
#define TITAN_CORE_RUNTIME_CONTROL_PLANE_BALANCER_H_

#include <vector>

#include "titan/balance.h"

namespace titan {

struct Balanced {
  std::vector<int32_t> controller_of;  // per switch
  double lower_bound = 0.0;            // the policy's, for Assign; the trivial bound after
  bool policy_bound = false;           // lower_bound came from the policy
};

// The policy's assignment of `problem` (loads set) without the controllers marked in `lost`.
absl::StatusOr<Balanced> AssignControllers(BalancePlugin& policy, const BalanceProblem& problem,
                                           const std::vector<bool>& lost);

// `current` re-balanced by the policy with the controllers marked in `lost` removed: their
// switches first go to their least-loaded live potential controller, then Rebalance moves what
// it moves. For both, a switch with no live potential controller is an error naming it.
absl::StatusOr<Balanced> RebalanceControllers(BalancePlugin& policy, const BalanceProblem& problem,
                                              const std::vector<int32_t>& current,
                                              const std::vector<bool>& lost);

// Each controller's load under `controller_of`.
std::vector<double> ControllerLoads(const BalanceProblem& problem,
                                    const std::vector<int32_t>& controller_of);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_CONTROL_PLANE_BALANCER_H_
