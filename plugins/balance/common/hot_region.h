// The last step of re-balancing's escalation, shared by every policy that moves switches: a
// restricted re-solve over the hot region. The switches on the controllers above the target
// (at most 30,000: those of the heaviest controllers) are re-assigned by the fewest-migrations
// LP (common/lp_model.h), the others fixed; when those alone cannot reach the target, the
// switches on the controllers they may use join in, once, if they too are at most 30,000.
// While a pass moves something and controllers stay above the target, up to 3 passes.
// The LP's answer is rounded, its moves are made while each is improving, and single moves and
// chains (common/rebalance.h) close what rounding left above the target.
#ifndef TITAN_PLUGINS_BALANCE_COMMON_HOT_REGION_H_
#define TITAN_PLUGINS_BALANCE_COMMON_HOT_REGION_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "plugins/balance/common/lp_model.h"
#include "plugins/balance/common/rebalance.h"
#include "titan/status.h"

namespace titan::balance {

// A basic solution of an LP over `problem` (x parallel to its potential lists) rounded to an
// assignment.
using LpRounding =
    std::function<std::vector<int32_t>(const BalanceProblem&, const FractionalAssignment&)>;

// Each switch to its largest share (at least 1/f of it).
std::vector<int32_t> LargestShare(const BalanceProblem& problem, const FractionalAssignment& lp);

// The re-solve described at the top of this file, from `state`, at most `max_moves` moves in
// all (counting state.moves).
absl::Status ResolveHotRegion(Rebalancing& state, double target, int64_t max_moves,
                              const LpRounding& round, int log_level);

// ReachTarget, escalated to ResolveHotRegion (rounded by largest share) when controllers stay
// above the target; if that too stays above it, ResolveHotRegion from `state` as it came,
// the LP policies' order, and the better of the two: the re-balance of greedy and distributed.
absl::Status ReachTargetOrResolve(Rebalancing& state, double target, int64_t max_moves);

}  // namespace titan::balance

#endif  // TITAN_PLUGINS_BALANCE_COMMON_HOT_REGION_H_
