// Re-balancing toward a target with few migrations, shared by the policies' Rebalance: the
// target itself, single moves off the controllers above it, and applying another policy's
// proposed moves only while each still helps.
#ifndef TITAN_PLUGINS_BALANCE_COMMON_REBALANCE_H_
#define TITAN_PLUGINS_BALANCE_COMMON_REBALANCE_H_

#include <cstdint>
#include <vector>

#include "titan/balance.h"
#include "titan/status.h"

namespace titan::balance {

// Checks `goal` (slack >= 1 and finite, lower_bound finite and >= 0, max_moves >= 0) and returns
// the bound the target is taken from: the larger of the caller's and `own_bound`.
absl::StatusOr<double> GoalBound(const RebalanceGoal& goal, double own_bound);

// An assignment being re-balanced: its loads and the moves made so far, in order.
struct Rebalancing {
  Rebalancing(const BalanceProblem& problem, const std::vector<int32_t>& current);
  const BalanceProblem& problem;
  std::vector<int32_t> assignment;
  std::vector<double> loads;
  std::vector<Migration> moves;
  double MaxLoad() const;
  void Move(int32_t s, int32_t to);
};

// Moves switches off every controller above `target`, heaviest controller first, until none is
// above it, none of them can be lowered by a single move, or `max_moves` moves were made. Each
// move is improving (common/local_search.h): to a controller that stays at most the target when
// one exists (the switch that clears the excess in one move if any, else the largest that
// fits), else the move to a controller within the target that lowers the pair's maximum most.
// Moves between two controllers above the target lower no excess and are not made.
void MoveTowardTarget(Rebalancing& state, double target, int64_t max_moves);

// Makes the moves of `proposed` that are improving when made, in passes until none is, at most
// `max_moves` in all; a move whose switch has already moved is skipped.
void ApplyImproving(Rebalancing& state, const std::vector<Migration>& proposed, int64_t max_moves);

// The bound and target of a re-balance of `current` (moves still empty): slack x the larger of
// the caller's bound and the densest-set bound (common/flow_bound.h), a bound the policy can
// reach, unlike the trivial one under a regional hotspot. When the current maximum is within
// slack x the trivial bound nothing will move, and the flow is not run.
absl::StatusOr<RebalanceResult> RebalanceTarget(const BalanceProblem& problem,
                                                const std::vector<int32_t>& current,
                                                const RebalanceGoal& goal);

// Single moves toward `target` (MoveTowardTarget), escalated, while controllers stay above it,
// to chains of moves through their neighbourhoods (common/chain_moves.h), then single moves
// again, until neither lowers anything or `max_moves` moves were made in all.
void ReachTarget(Rebalancing& state, double target, int64_t max_moves);
// The same with chains searched as far as `limits` (common/chain_moves.h) allow.
struct ChainLimits;
void ReachTarget(Rebalancing& state, double target, int64_t max_moves, const ChainLimits& limits);

// Greedy's re-balance: checks the instance and `current`, then ReachTargetOrResolve
// (common/hot_region.h) from `current` toward RebalanceTarget.
absl::StatusOr<RebalanceResult> RebalanceByMoves(const BalanceProblem& problem,
                                                 const std::vector<int32_t>& current,
                                                 const RebalanceGoal& goal);

// The switches on controllers above `target` (ascending).
std::vector<int32_t> SwitchesAbove(const Rebalancing& state, double target);

}  // namespace titan::balance

#endif  // TITAN_PLUGINS_BALANCE_COMMON_REBALANCE_H_
