// A lower bound every policy can afford: LP*, the optimum of LBDC's LP relaxation without
// capacities, by maximum flow instead of the simplex method.
//
// For a set S of controllers, the switches whose potential sets lie inside S (load L(S)) must
// all be watched from S, so some controller of S carries at least L(S) / |S|. The relaxation's
// optimum is the largest of these ratios (max-flow min-cut), and it is found by raising a
// target T: move fractions of switches from controllers above T to controllers below it along
// augmenting paths (Dinic's algorithm); if some excess is left, the controllers it can reach
// form a set S with L(S) / |S| > T, which becomes the next T (Dinkelbach's method, a few
// rounds). The flow persists from one T to the next, and starts from a given assignment, so a
// near-balanced one leaves little to push. Each push aims 0.1% above T (exact balance takes
// many more augmenting phases), so the bound is within 0.1% of LP*. The bound returned is always
// max w or L(S) / |S| of an explicit S, so it is valid whatever the flow's rounding errors.
// Capacities only restrict assignments, so the bound holds for capacitated instances too.
//
// Under a regional hotspot this bound is the hot region's density, where the trivial bound
// max(max w, sum w / m) is the whole network's and cannot be reached.
#ifndef TITAN_PLUGINS_BALANCE_COMMON_FLOW_BOUND_H_
#define TITAN_PLUGINS_BALANCE_COMMON_FLOW_BOUND_H_

#include <cstdint>
#include <vector>

#include "titan/balance.h"

namespace titan::balance {

struct PotentialSetBound {
  double bound = 0.0;  // max(max w, L(densest) / |densest|), or sum w / m
  // The controllers of the densest set found (all of them when sum w / m is the bound).
  std::vector<int32_t> densest;
  // Each switch at the controller carrying its largest share of the last fractional assignment
  // (its start controller on ties): balanced over the whole network, where single moves leave
  // regions of heavy controllers, though above the bound by the rounding.
  std::vector<int32_t> rounded;
};

// `start`: a valid assignment of `problem` (the flow's starting point).
PotentialSetBound DensestSetBound(const BalanceProblem& problem, const std::vector<int32_t>& start);

// L(S) / |S| for the controllers `set` (each listed once, none out of range).
double SetDensity(const BalanceProblem& problem, const std::vector<int32_t>& set);

}  // namespace titan::balance

#endif  // TITAN_PLUGINS_BALANCE_COMMON_FLOW_BOUND_H_
