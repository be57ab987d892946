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
// optimal exactly when lower_bound equals its maximum load.
#include <algorithm>
#include <cmath>

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
#include "plugins/balance/common/solver_policy.h"

namespace titan::balance {
namespace {

bool AllIntegral(const std::vector<double>& loads) {
  return std::all_of(loads.begin(), loads.end(), [](double w) { return w == std::floor(w); });
}

// What CBC concluded about the model restricted to assignments better than greedy's.
struct Search {
  std::vector<double> solution;  // empty: none found
  bool exhausted = false;        // the whole tree was searched (or the model is infeasible)
  double bound = 0.0;            // on the restricted model's optimum, when not exhausted
};

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
  CbcModel cbc(*reduced);
  cbc.setLogLevel(log_level);
  cbc.setMaximumSeconds(time_limit_s);
  CglProbing probing;
  probing.setUsingObjective(1);
  probing.setMaxPass(3);
  probing.setMaxProbe(100);
  probing.setMaxLook(50);
  CglGomory gomory;
  gomory.setLimit(300);
  CglKnapsackCover knapsack;
  CglClique clique;
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
    keys.push_back(
        ConfigKey{"time_limit_s",
                  ConfigType::kFloat,
                  ConfigValue(60.0),
                  "stop CBC's search after this many seconds; the result is then the best "
                  "assignment found and lower_bound CBC's best bound (below the max load)",
                  0.001,
                  {},
                  {}});
    return keys;
  }

  absl::Status Configure(const ConfigView& config) override {
    TITAN_RETURN_IF_ERROR(SolverPolicy::Configure(config));
    TITAN_ASSIGN_OR_RETURN(time_limit_s_, config.GetFloat("time_limit_s"));
    return absl::OkStatus();
  }

  absl::StatusOr<BalanceResult> Assign(const BalanceProblem& problem) override {
    TITAN_RETURN_IF_ERROR(ValidateProblem(problem));
    const bool integral = AllIntegral(problem.switch_load);
    // Any assignment's max load is a sum of loads, so with integral loads it is an integer.
    double bound = TrivialLowerBound(problem);
    if (integral) bound = std::ceil(bound - LoadTolerance(problem));
    BalanceResult result;
    std::vector<int32_t> greedy = LargestFirst(problem);
    std::vector<double> loads = ControllerLoads(problem, greedy);
    ImproveByMoves(problem, greedy, loads);
    bool greedy_fits = true;
    for (int c = 0; c < problem.num_controllers(); ++c) {
      greedy_fits = greedy_fits && loads[c] <= problem.controller_capacity[c];
    }
    const double greedy_max = MaxLoad(problem, greedy);
    if (greedy_fits && greedy_max <= bound + LoadTolerance(problem)) {
      result.controller_of = std::move(greedy);
      result.lower_bound = greedy_max;
      return result;
    }

    LpModel model = BuildMinMaxModel(problem);
    model.column_lower[model.load_column] = bound;
    if (greedy_fits) {  // only strictly better assignments are of interest
      model.column_upper[model.load_column] =
          integral ? greedy_max - 1.0 : greedy_max - LoadTolerance(problem);
    }
    Search search;
    try {
      OsiClpSolverInterface solver;
      solver.messageHandler()->setLogLevel(solver_log());
      solver.loadProblem(model.matrix, model.column_lower.data(), model.column_upper.data(),
                         model.objective.data(), model.row_lower.data(), model.row_upper.data());
      for (int column = 0; column < model.load_column; ++column) solver.setInteger(column);
      if (integral) solver.setInteger(model.load_column);
      search = BranchAndBound(solver, time_limit_s_, solver_log());
    } catch (const CoinError& error) {
      return absl::InternalError(
          absl::StrCat("CBC failed in ", error.methodName(), ": ", error.message()));
    }
    if (search.solution.empty()) {
      if (!greedy_fits) {
        if (search.exhausted) {
          return absl::FailedPreconditionError("the controller capacities admit no assignment");
        }
        return absl::DeadlineExceededError(
            absl::StrCat("CBC found no assignment within ", time_limit_s_, " s"));
      }
      result.controller_of = std::move(greedy);
    } else {
      result.controller_of.resize(problem.num_switches());
      for (int s = 0; s < problem.num_switches(); ++s) {
        const double* x = search.solution.data() + model.first_column[s];
        const size_t k = problem.potential[s].size();
        result.controller_of[s] = problem.potential[s][std::max_element(x, x + k) - x];
      }
    }
    const double found = MaxLoad(problem, result.controller_of);
    // Exhausted: nothing better than `found` exists (below greedy's value, CBC found the best).
    result.lower_bound = search.exhausted ? found : std::min(found, std::max(search.bound, bound));
    return result;
  }

 private:
  double time_limit_s_ = 60.0;
};

}  // namespace titan::balance

TITAN_PLUGIN(titan::BalancePlugin, titan::balance::Ilp, "ilp", "1.0.0",
             "exact optimum by integer programming (CBC), for instances of a few hundred switches")
