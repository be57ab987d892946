// Single-switch moves. A move of switch s from controller a to b is improving when
// load(b) + w_s < load(a): afterwards both are below load(a), so the sorted load vector drops
// and the sum of squared loads falls by 2 w_s (load(a) - load(b) - w_s) > 0. Repeating such moves
// therefore ends, at an assignment where no single move lowers the heavier end of any pair.
#ifndef TITAN_PLUGINS_BALANCE_COMMON_LOCAL_SEARCH_H_
#define TITAN_PLUGINS_BALANCE_COMMON_LOCAL_SEARCH_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "titan/balance.h"

namespace titan::balance {

// True when `to` can take `load` more without exceeding its capacity.
inline bool HasRoom(const BalanceProblem& problem, const std::vector<double>& loads, int32_t to,
                    double load) {
  return loads[to] + load <= problem.controller_capacity[to];
}

// The constructive step of greedy (LPT): switches in order of decreasing load, each to its
// least-loaded potential controller with room (the least-loaded one when none has room).
std::vector<int32_t> LargestFirst(const BalanceProblem& problem);

// Moves switches, each to its lightest other potential controller with room, while a move is
// improving. Updates `assignment` and `loads` (as ControllerLoads gives them); returns the number
// of moves made.
int64_t ImproveByMoves(const BalanceProblem& problem, std::vector<int32_t>& assignment,
                       std::vector<double>& loads);

// An improving move left in `assignment`, if any (for tests and post-conditions).
std::optional<Migration> FindImprovingMove(const BalanceProblem& problem,
                                           const std::vector<int32_t>& assignment);

}  // namespace titan::balance

#endif  // TITAN_PLUGINS_BALANCE_COMMON_LOCAL_SEARCH_H_
