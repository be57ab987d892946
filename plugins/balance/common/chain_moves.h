// The escalation of re-balancing when single moves leave a controller above the target: chains
// of moves through the hot controller's neighbourhood. Switch s1 leaves controller a for b, b
// passes s2 on to c, and so on until a controller takes the last switch within the target; or
// the last switch comes back to a, lighter than s1 (a swap). Every controller of the chain but
// a ends at most the target, and a ends lighter, so the maximum never rises and the total
// excess over the target falls with every chain. The moves are listed last first, so that
// between two moves of a chain that ends with room no controller is above both the target and
// its load before (a swap's two moves go together).
//
// Chains are searched shortest first (iterative deepening), on a's switches that clear its
// excess in one chain first (the smallest), then the largest; each intermediate controller
// passes on one of its switches that brings it within the target, the smallest first. A
// search is cut after a fixed number of steps, so its cost stays local however large the
// instance.
#ifndef TITAN_PLUGINS_BALANCE_COMMON_CHAIN_MOVES_H_
#define TITAN_PLUGINS_BALANCE_COMMON_CHAIN_MOVES_H_

#include <cstdint>

#include "plugins/balance/common/rebalance.h"

namespace titan::balance {

// How far chains are searched: the longest chain, and the steps (controllers entered) one
// search may take. The defaults keep each search local on 100,000 switches; longer chains
// drain more (10 links and 10^6 steps brought a 10k x 1,000 change of drift 0.3 to 1.02 x the
// bound, docs/benchmarks.md) at minutes per change.
struct ChainLimits {
  int max_length = 3;
  int64_t search_steps = 20000;
};

// Makes chains off the controllers above `target`, heaviest first, in passes until a pass
// makes none or `max_moves` moves were made (a chain that does not fit in what is left of the
// budget is not made). With `clearing`, only chains that bring their first controller within
// the target, and single moves count as chains of one. Returns the number of moves made.
int64_t MoveChainsTowardTarget(Rebalancing& state, double target, int64_t max_moves, bool clearing,
                               const ChainLimits& limits = {});

}  // namespace titan::balance

#endif  // TITAN_PLUGINS_BALANCE_COMMON_CHAIN_MOVES_H_
