// greedy: the centralized heuristic. Largest switch first to its least-loaded potential
// controller, then a migration phase that moves switches off the heavier controller of any pair
// while that lowers it without making the other as heavy (see common/local_search.h). When
// that is above 1.02 x the densest-set bound (common/flow_bound.h), the flow's rounded
// assignment, repaired by the re-balancing moves and the same migration phase, is kept instead
// if it is better. It ends with no improving single move, so in particular no single move lowers
// the maximum load.
// Rebalance moves only what lowers a controller above the target.
#include <limits>

#include "plugins/balance/common/flow_bound.h"
#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/local_search.h"
#include "plugins/balance/common/rebalance.h"

namespace titan::balance {

class Greedy : public BalancePlugin {
 public:
  std::vector<ConfigKey> ConfigKeys() const override {
    return {ConfigKey{"migrate",
                      ConfigType::kBool,
                      ConfigValue(true),
                      "run the migration phase after the largest-first assignment",
                      {},
                      {},
                      {}}};
  }

  absl::Status Configure(const ConfigView& config) override {
    TITAN_ASSIGN_OR_RETURN(migrate_, config.GetBool("migrate"));
    return absl::OkStatus();
  }

  absl::StatusOr<BalanceResult> Assign(const BalanceProblem& problem) override {
    TITAN_RETURN_IF_ERROR(ValidateProblem(problem));
    BalanceResult result;
    result.controller_of = LargestFirst(problem);
    if (migrate_) {
      std::vector<double> loads = ControllerLoads(problem, result.controller_of);
      result.rounds = ImproveByMoves(problem, result.controller_of, loads);
    }
    const PotentialSetBound bound = DensestSetBound(problem, result.controller_of);
    result.lower_bound = bound.bound;
    // Single moves cannot carry load across a region of heavy controllers (each neighbour is
    // as heavy); the flow did, fractionally. Its rounding, repaired, is tried when greedy is
    // off by more than a re-balance's default slack: not otherwise, where the repair toward the
    // bound itself would search in vain (6 s instead of 0.1 s at 100k switches).
    if (migrate_ && MaxLoad(problem, result.controller_of) > RebalanceGoal{}.slack * bound.bound) {
      Rebalancing state(problem, bound.rounded);
      ReachTarget(state, bound.bound, std::numeric_limits<int64_t>::max());
      int64_t moves = ImproveByMoves(problem, state.assignment, state.loads);
      if (state.MaxLoad() < MaxLoad(problem, result.controller_of)) {
        result.controller_of = std::move(state.assignment);
        result.rounds += moves;
      }
    }
    return result;
  }

  // Moves only switches off controllers above the target (common/rebalance.h), starting from
  // the current assignment, with the densest-set bound as its own.
  absl::StatusOr<RebalanceResult> Rebalance(const BalanceProblem& problem,
                                            const std::vector<int32_t>& current,
                                            const RebalanceGoal& goal) override {
    TITAN_RETURN_IF_ERROR(ValidateProblem(problem));
    return RebalanceByMoves(problem, current, goal);
  }

 private:
  bool migrate_ = true;
};

}  // namespace titan::balance

TITAN_PLUGIN(titan::BalancePlugin, titan::balance::Greedy, "greedy", "1.0.0",
             "largest switch first to the least-loaded controller, then improving migrations")
