// ilp: the exact optimum, the LBDC model of common/lp_model.h with binary x solved by CBC's
// branch and bound. Meant for instances of up to a few hundred switches, to measure the true
// approximation ratio of the other policies.
//
// Greedy's assignment comes first. If it meets the trivial lower bound it is optimal and CBC is
// not run. Otherwise CBC searches only for assignments strictly better than greedy's (L below
// its value, at least the trivial bound), after CBC's preprocessing and with its standard cut
// generators and heuristics; a root LP bound at greedy's value proves greedy optimal at once.
// Symmetric instances (identical controllers, real loads) can still take CBC hours to prove, so
// the search stops at a time limit; the result then carries CBC's best bound, and it is proven
// optimal when lower_bound is within kOptimalityTolerance of its maximum load. CBC sees loads
// normalised (common/instance.h), so that holds at every scale of load, and its answer is
// checked against the original loads: never worse than greedy's.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "coin/CbcHeuristic.hpp"
#include "coin/CbcHeuristicFPump.hpp"
#include "coin/CbcHeuristicLocal.hpp"
#include "coin/CbcModel.hpp"
#include "coin/CglClique.hpp"
#include "coin/CglFlowCover.hpp"
#include "coin/CglGomory.hpp"
#include "coin/CglKnapsackCover.hpp"
#include "coin/CglMixedIntegerRounding2.hpp"
#include "coin/CglPreProcess.hpp"
#include "coin/CglProbing.hpp"
#include "coin/CoinError.hpp"
#include "coin/OsiClpSolverInterface.hpp"
#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/local_search.h"
#include "plugins/balance/common/lp_model.h"
#include "plugins/balance/common/rebalance.h"
#include "plugins/balance/common/solver_policy.h"

namespace titan::balance {
namespace {

bool Fits(const BalanceProblem& problem, const std::vector<int32_t>& assignment) {
  const std::vector<double> loads = ControllerLoads(problem, assignment);
  for (int c = 0; c < problem.num_controllers(); ++c) {
    if (loads[c] > problem.controller_capacity[c]) return false;
  }
  return true;
}

bool AllIntegral(const std::vector<double>& loads) {
  return std::all_of(loads.begin(), loads.end(), [](double w) { return w == std::floor(w); });
}

// What CBC concluded about the model restricted to assignments better than greedy's.
struct Search {
  std::vector<double> solution;  // empty: none found
  bool exhausted = false;        // the whole tree was searched (or the model is infeasible)
  double bound = 0.0;            // on the restricted model's optimum, when not exhausted
};

// CBC works to absolute tolerances of about 1e-7 (integrality, feasibility, the step by which
// it demands better solutions), so every model it sees has loads scaled to make the trivial
// bound 1: its proofs then hold to about 1e-7 of the optimum at any scale of load.
constexpr double kProofTolerance = 1e-7;

// Runs CBC on `solver` after CglPreProcess, with its standard cuts and heuristics.
Search BranchAndBound(OsiClpSolverInterface& solver, double time_limit_s, int log_level) {
  Search search;
  CglPreProcess process;
  process.messageHandler()->setLogLevel(log_level);
  OsiSolverInterface* reduced = process.preProcess(solver, false, 5);
  if (reduced == nullptr) {  // preprocessing proved the model infeasible
    search.exhausted = true;
    return search;
  }
  reduced->setHintParam(OsiDoReducePrint, log_level == 0, OsiHintTry);
  reduced->messageHandler()->setLogLevel(log_level);
  CbcModel cbc(*reduced);
  cbc.setLogLevel(log_level);
  cbc.messageHandler()->setLogLevel(log_level);
  cbc.solver()->messageHandler()->setLogLevel(log_level);
  cbc.setMaximumSeconds(time_limit_s);
  cbc.setUseElapsedTime(true);  // the limit is wall time: CPU time runs slow on a loaded machine
  cbc.setIntegerTolerance(kProofTolerance);
  cbc.setDblParam(CbcModel::CbcCutoffIncrement, kProofTolerance);
  cbc.setAllowableGap(kProofTolerance / 10);
  cbc.setAllowableFractionGap(0.0);
  CglProbing probing;
  probing.setUsingObjective(1);
  probing.setMaxPass(3);
  probing.setMaxProbe(100);
  probing.setMaxLook(50);
  CglGomory gomory;
  gomory.setLimit(300);
  CglKnapsackCover knapsack;
  CglClique clique;
  // CglClique prints its reports with printf, whatever the log level.
  clique.setStarCliqueReport(log_level > 0);
  clique.setRowCliqueReport(log_level > 0);
  CglMixedIntegerRounding2 rounding;
  CglFlowCover flow_cover;
  cbc.addCutGenerator(&probing, -1, "Probing");
  cbc.addCutGenerator(&gomory, -1, "Gomory");
  cbc.addCutGenerator(&knapsack, -1, "Knapsack");
  cbc.addCutGenerator(&clique, -1, "Clique");
  cbc.addCutGenerator(&rounding, -1, "MixedIntegerRounding2");
  cbc.addCutGenerator(&flow_cover, -1, "FlowCover");
  CbcRounding simple_rounding(cbc);
  CbcHeuristicFPump pump(cbc);
  CbcHeuristicLocal local(cbc);
  cbc.addHeuristic(&simple_rounding);
  cbc.addHeuristic(&pump);
  cbc.addHeuristic(&local);
  cbc.branchAndBound();
  search.exhausted = cbc.isProvenOptimal() || cbc.isProvenInfeasible();
  search.bound = cbc.getBestPossibleObjValue();
  if (cbc.bestSolution() != nullptr) {
    process.postProcess(*cbc.solver());
    search.solution.assign(solver.getColSolution(), solver.getColSolution() + solver.getNumCols());
  }
  return search;
}

}  // namespace

class Ilp : public SolverPolicy {
 public:
  std::vector<ConfigKey> ConfigKeys() const override {
    std::vector<ConfigKey> keys = SolverPolicy::ConfigKeys();
    keys.push_back(ConfigKey{
        "time_limit_s",
        ConfigType::kFloat,
        ConfigValue(60.0),
        "stop CBC's search after this many seconds of wall time; the result is then the best "
        "assignment found and lower_bound CBC's best bound (below the max load)",
        0.001,
        {},
        {}});
    return keys;
  }

  absl::Status Configure(const ConfigView& config) override {
    TITAN_RETURN_IF_ERROR(SolverPolicy::Configure(config));
    TITAN_ASSIGN_OR_RETURN(time_limit_s_, config.GetFloat("time_limit_s"));
    if (!std::isfinite(time_limit_s_) || time_limit_s_ < 0.001) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ilp.time_limit_s = ", time_limit_s_, ": expected a finite number of seconds >= 0.001"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<BalanceResult> Assign(const BalanceProblem& problem) override {
    TITAN_RETURN_IF_ERROR(ValidateProblem(problem));
    if (TrivialLowerBound(problem) <= 0.0) {  // every load is 0: any assignment is optimal
      BalanceResult result;
      result.controller_of = LargestFirst(problem);
      return result;
    }
    const Normalised normalised = Normalise(problem);
    // Any assignment's max load is a sum of loads, so with integral loads it is an integer.
    const double step = AllIntegral(problem.switch_load) ? 1.0 / normalised.unit : 0.0;
    TITAN_ASSIGN_OR_RETURN(BalanceResult result, Solve(normalised.problem, step));
    // CBC's answer in the rounded units is checked against the original loads: never worse than
    // greedy's, and the bound less the rounding's error.
    std::vector<int32_t> greedy = LargestFirst(problem);
    std::vector<double> loads = ControllerLoads(problem, greedy);
    ImproveByMoves(problem, greedy, loads);
    if (MaxLoad(problem, greedy) < MaxLoad(problem, result.controller_of) &&
        Fits(problem, greedy)) {
      result.controller_of = std::move(greedy);
    }
    const double bound = std::max(0.0, (result.lower_bound - normalised.error) * normalised.unit);
    result.lower_bound = std::min(bound, MaxLoad(problem, result.controller_of));
    return result;
  }

  // The fewest moves that bring the maximum to the target, exactly (the migration model of
  // common/lp_model.h with binary x and no excess); when CBC finds none in time, the moves to
  // the optimum (which meets any target >= its bound), within the budget.
  absl::StatusOr<RebalanceResult> Rebalance(const BalanceProblem& problem,
                                            const std::vector<int32_t>& current,
                                            const RebalanceGoal& goal) override {
    TITAN_ASSIGN_OR_RETURN(BalanceResult best, Assign(problem));
    TITAN_RETURN_IF_ERROR(ValidateAssignment(problem, current));
    RebalanceResult result;
    TITAN_ASSIGN_OR_RETURN(result.lower_bound, GoalBound(goal, best.lower_bound));
    result.target = goal.slack * result.lower_bound;
    Rebalancing state(problem, current);
    if (state.MaxLoad() <= result.target + LoadTolerance(problem)) return result;
    std::vector<Migration> proposed = Diff(current, best.controller_of);
    const Normalised normalised = Normalise(problem);
    std::vector<int32_t> all(problem.num_switches());
    std::iota(all.begin(), all.end(), 0);
    LpModel model =
        BuildMigrationModel(normalised.problem, current, all, result.target / normalised.unit);
    model.column_upper[model.load_column] = kProofTolerance;
    TITAN_ASSIGN_OR_RETURN(Search search, SolveInteger(model));
    if (!search.solution.empty()) {
      const std::vector<int32_t> fewest = Assignment(problem, model, search.solution);
      if (MaxLoad(problem, fewest) <= result.target + LoadTolerance(problem)) {
        proposed = Diff(current, fewest);
      }
    }
    if (static_cast<int64_t>(proposed.size()) <= goal.max_moves) {
      result.moves = std::move(proposed);  // together they meet the target, one by one not always
      return result;
    }
    ApplyImproving(state, proposed, goal.max_moves);
    MoveTowardTarget(state, result.target,
                     goal.max_moves - static_cast<int64_t>(state.moves.size()));
    result.moves = std::move(state.moves);
    return result;
  }

 private:
  // Each switch to the controller of its largest x in `solution` of `model`.
  static std::vector<int32_t> Assignment(const BalanceProblem& problem, const LpModel& model,
                                         const std::vector<double>& solution) {
    std::vector<int32_t> controller_of(problem.num_switches());
    for (int s = 0; s < problem.num_switches(); ++s) {
      const double* x = solution.data() + model.first_column[s];
      const size_t k = problem.potential[s].size();
      controller_of[s] = problem.potential[s][std::max_element(x, x + k) - x];
    }
    return controller_of;
  }

  // The optimum of `problem`, whose trivial bound is 1; with `step` > 0 every assignment's max
  // load is a multiple of it.
  absl::StatusOr<BalanceResult> Solve(const BalanceProblem& problem, double step) {
    const double tolerance = LoadTolerance(problem);
    double bound = TrivialLowerBound(problem);
    if (step > 0.0) bound = std::ceil(bound / step - 1e-9) * step;
    BalanceResult result;
    std::vector<int32_t> greedy = LargestFirst(problem);
    std::vector<double> loads = ControllerLoads(problem, greedy);
    ImproveByMoves(problem, greedy, loads);
    bool greedy_fits = true;
    for (int c = 0; c < problem.num_controllers(); ++c) {
      greedy_fits = greedy_fits && loads[c] <= problem.controller_capacity[c];
    }
    const double greedy_max = MaxLoad(problem, greedy);
    if (greedy_fits && greedy_max <= bound + tolerance) {
      result.controller_of = std::move(greedy);
      result.lower_bound = greedy_max;
      return result;
    }

    LpModel model = BuildMinMaxModel(problem);
    model.column_lower[model.load_column] = bound;
    if (greedy_fits) {  // only strictly better assignments are of interest
      model.column_upper[model.load_column] =
          step > 0.0 ? greedy_max - step * (1 - 1e-9) : greedy_max - 2 * kProofTolerance;
    }
    TITAN_ASSIGN_OR_RETURN(Search search, SolveInteger(model));
    if (search.solution.empty() && !greedy_fits) {
      if (search.exhausted) {
        return absl::FailedPreconditionError("the controller capacities admit no assignment");
      }
      return absl::DeadlineExceededError(
          absl::StrCat("CBC found no assignment within ", time_limit_s_, " s"));
    }
    result.controller_of = std::move(greedy);
    if (!search.solution.empty()) {
      std::vector<int32_t> found = Assignment(problem, model, search.solution);
      // Never worse than the start: CBC's answer is checked, not trusted.
      if (!greedy_fits || MaxLoad(problem, found) < greedy_max) {
        result.controller_of = std::move(found);
      }
    }
    const double found = MaxLoad(problem, result.controller_of);
    // Exhausted: nothing better than `found` by more than CBC's tolerance exists.
    result.lower_bound = search.exhausted ? std::max(bound, found - kProofTolerance)
                                          : std::min(found, std::max(search.bound, bound));
    return result;
  }

  // The model with its assignment columns integer, by CBC's branch and bound.
  absl::StatusOr<Search> SolveInteger(const LpModel& model) const {
    try {
      OsiClpSolverInterface solver;
      solver.messageHandler()->setLogLevel(solver_log());
      solver.loadProblem(model.matrix, model.column_lower.data(), model.column_upper.data(),
                         model.objective.data(), model.row_lower.data(), model.row_upper.data());
      for (int column = 0; column < model.load_column; ++column) solver.setInteger(column);
      return BranchAndBound(solver, time_limit_s_, solver_log());
    } catch (const CoinError& error) {
      return absl::InternalError(
          absl::StrCat("CBC failed in ", error.methodName(), ": ", error.message()));
    }
  }

  double time_limit_s_ = 60.0;
};

}  // namespace titan::balance

TITAN_PLUGIN(titan::BalancePlugin, titan::balance::Ilp, "ilp", "1.0.0",
             "exact optimum by integer programming (CBC), for instances of a few hundred switches")
