// What every balance policy needs about an LBDC instance: validation with errors that name the
// bad switch or controller, controller loads, the trivial lower bounds and assignment diffs.
#ifndef TITAN_PLUGINS_BALANCE_COMMON_INSTANCE_H_
#define TITAN_PLUGINS_BALANCE_COMMON_INSTANCE_H_

#include <cstdint>
#include <vector>

#include "titan/balance.h"
#include "titan/status.h"

namespace titan::balance {

// Every switch has a non-negative finite load (their sum finite too) and at least one potential
// controller, each a valid index listed once; capacities are positive (or +inf); distances, when
// given, are parallel to the potential lists.
absl::Status ValidateProblem(const BalanceProblem& problem);

// `assignment` has one entry per switch, each one of that switch's potential controllers.
absl::Status ValidateAssignment(const BalanceProblem& problem,
                                const std::vector<int32_t>& assignment);

std::vector<double> ControllerLoads(const BalanceProblem& problem,
                                    const std::vector<int32_t>& assignment);
double MaxLoad(const BalanceProblem& problem, const std::vector<int32_t>& assignment);

// max(max_s w_s, sum_s w_s / m): every switch sits somewhere and some controller carries at
// least the average.
double TrivialLowerBound(const BalanceProblem& problem);

// Each switch's nearest potential controller (ties, and no distances: the one listed first).
std::vector<int32_t> NearestControllers(const BalanceProblem& problem);

// f = max_s |P(s)|.
int MaxPotential(const BalanceProblem& problem);

// The moves that turn `current` into `next`.
std::vector<Migration> Diff(const std::vector<int32_t>& current, const std::vector<int32_t>& next);

// `problem` with every load and capacity multiplied by `factor`.
BalanceProblem ScaledLoads(const BalanceProblem& problem, double factor);

// The instance the COIN-OR solvers see: loads and capacities in units of the trivial bound,
// rounded to multiples of 2^-40. Their tolerances are absolute, and their path through a
// degenerate LP follows the last bits of its input, so scaling every load by any factor must
// give them the same numbers.
struct Normalised {
  BalanceProblem problem;
  double unit = 1.0;   // the trivial bound (1 when every load is 0)
  double error = 0.0;  // the most the rounding moves any controller's load, in units
};
Normalised Normalise(const BalanceProblem& problem);

// Loads are compared with this slack, so that float rounding never makes a move look improving
// and local searches cannot cycle. Relative to the largest load, so that scaling every load
// scales every decision alike.
double LoadTolerance(const BalanceProblem& problem);

}  // namespace titan::balance

#endif  // TITAN_PLUGINS_BALANCE_COMMON_INSTANCE_H_
