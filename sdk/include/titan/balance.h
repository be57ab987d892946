// `balance` plugins solve LBDC, load balancing for devolved controllers: assign every switch
// to one of its potential controllers so that the most loaded controller carries as little
// load as possible, and re-balance an existing assignment with few migrations.
#ifndef TITAN_BALANCE_H_
#define TITAN_BALANCE_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "titan/plugin.h"

namespace titan {

struct BalanceProblem {
  std::vector<double> switch_load;              // w_s >= 0
  std::vector<double> controller_capacity;      // +inf when uncapacitated
  std::vector<std::vector<int32_t>> potential;  // P(s): controller indices
  std::vector<std::vector<double>> distance;    // hop distance, parallel to potential
  int num_controllers() const { return static_cast<int>(controller_capacity.size()); }
  int num_switches() const { return static_cast<int>(switch_load.size()); }
};

struct BalanceResult {
  std::vector<int32_t> controller_of;  // per switch
  double lower_bound = 0.0;            // a proven lower bound on the optimum, 0 if none
  int64_t rounds = 0;                  // for iterative and distributed policies
  int64_t messages = 0;                // for distributed policies
  // LP-rounding policies: the LP value whose rounding produced this assignment (LP* for
  // lp-round, LST's target T for lst), and the heaviest switch whose LP value was fractional,
  // so callers can check the guarantees max load <= f * LP* and max load <= T + that switch.
  double fractional_bound = 0.0;
  double largest_fractional_load = 0.0;
};

struct Migration {
  int32_t switch_index = 0;
  int32_t from = 0;
  int32_t to = 0;
};

// What a re-balance aims for: the most loaded controller at most `slack` x the best lower bound
// (the larger of `lower_bound` and the one the policy proves itself), moving at most `max_moves`
// switches. Within the target a policy moves nothing; above it, as few switches as it can.
struct RebalanceGoal {
  double slack = 1.02;
  double lower_bound = 0.0;  // one the caller knows, 0 if none
  int64_t max_moves = std::numeric_limits<int64_t>::max();
};

struct RebalanceResult {
  std::vector<Migration> moves;  // in the order they are to be made
  double target = 0.0;           // the max load aimed for: slack x lower_bound
  double lower_bound = 0.0;      // the bound the target was taken from (caller's or proven)
};

// A result counts as proven optimal when its lower bound is within this relative distance of
// its max load: the accuracy of ilp's proofs, whose solver works to tolerances of about 1e-7.
inline constexpr double kOptimalityTolerance = 1e-6;
inline bool ProvenOptimal(double max_load, double lower_bound) {
  return lower_bound >= max_load * (1.0 - kOptimalityTolerance);
}

class BalancePlugin : public Plugin {
 public:
  virtual absl::StatusOr<BalanceResult> Assign(const BalanceProblem& problem) = 0;
  virtual absl::StatusOr<RebalanceResult> Rebalance(const BalanceProblem& problem,
                                                    const std::vector<int32_t>& current,
                                                    const RebalanceGoal& goal) = 0;
};

template <>
struct PluginKind<BalancePlugin> {
  static constexpr const char* kName = "balance";
};

}  // namespace titan

#endif  // TITAN_BALANCE_H_
