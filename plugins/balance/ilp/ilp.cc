// ilp: the exact optimum, the LBDC model of common/lp_model.h with binary x solved by CBC's
// branch and bound, started from the greedy assignment. Meant for instances of up to a few
// hundred switches, to measure the true approximation ratio of the other policies.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "coin/CbcModel.hpp"
#include "coin/CoinError.hpp"
#include "coin/OsiClpSolverInterface.hpp"
#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/local_search.h"
#include "plugins/balance/common/lp_model.h"

namespace titan::balance {

class Ilp : public BalancePlugin {
 public:
  std::vector<ConfigKey> ConfigKeys() const override {
    return {ConfigKey{"time_limit_s",
                      ConfigType::kFloat,
                      ConfigValue(0.0),
                      "stop the search after this many seconds (0: none); the result is then the "
                      "best assignment found and lower_bound CBC's best bound",
                      0.0,
                      {},
                      {}},
            ConfigKey{"solver_log",
                      ConfigType::kInt,
                      ConfigValue(int64_t{0}),
                      "CBC log level, 0 (silent) to 4",
                      0.0,
                      4.0,
                      {}}};
  }

  absl::Status Configure(const ConfigView& config) override {
    TITAN_ASSIGN_OR_RETURN(time_limit_s_, config.GetFloat("time_limit_s"));
    TITAN_ASSIGN_OR_RETURN(int64_t level, config.GetInt("solver_log"));
    solver_log_ = static_cast<int>(level);
    return absl::OkStatus();
  }

  absl::StatusOr<BalanceResult> Assign(const BalanceProblem& problem) override {
    TITAN_RETURN_IF_ERROR(ValidateProblem(problem));
    const LpModel model = BuildMinMaxModel(problem);
    std::vector<double> start = StartingPoint(problem, model);
    std::vector<double> best;
    double bound = 0.0;
    bool optimal = false;
    try {
      OsiClpSolverInterface solver;
      solver.messageHandler()->setLogLevel(solver_log_);
      solver.loadProblem(model.matrix, model.column_lower.data(), model.column_upper.data(),
                         model.objective.data(), model.row_lower.data(), model.row_upper.data());
      for (int column = 0; column < model.load_column; ++column) solver.setInteger(column);
      CbcModel cbc(solver);
      cbc.setLogLevel(solver_log_);
      if (time_limit_s_ > 0.0) cbc.setMaximumSeconds(time_limit_s_);
      if (!start.empty())
        cbc.setBestSolution(start.data(), static_cast<int>(start.size()), start[model.load_column]);
      cbc.branchAndBound();
      if (cbc.isProvenInfeasible()) {
        return absl::FailedPreconditionError("the controller capacities admit no assignment");
      }
      if (cbc.bestSolution() == nullptr) {
        return absl::DeadlineExceededError(
            absl::StrCat("CBC found no assignment within ", time_limit_s_, " s"));
      }
      best.assign(cbc.bestSolution(), cbc.bestSolution() + cbc.getNumCols());
      bound = cbc.getBestPossibleObjValue();
      optimal = cbc.isProvenOptimal();
    } catch (const CoinError& error) {
      return absl::InternalError(
          absl::StrCat("CBC failed in ", error.methodName(), ": ", error.message()));
    }
    BalanceResult result;
    result.controller_of.resize(problem.num_switches());
    for (int s = 0; s < problem.num_switches(); ++s) {
      const double* x = best.data() + model.first_column[s];
      const size_t k = problem.potential[s].size();
      result.controller_of[s] = problem.potential[s][std::max_element(x, x + k) - x];
    }
    const double found = MaxLoad(problem, result.controller_of);
    result.lower_bound = optimal ? found : std::max(bound, TrivialLowerBound(problem));
    return result;
  }

  absl::StatusOr<std::vector<Migration>> Rebalance(const BalanceProblem& problem,
                                                   const std::vector<int32_t>& current) override {
    TITAN_ASSIGN_OR_RETURN(BalanceResult fresh, Assign(problem));
    return MigrateIfLower(problem, current, fresh.controller_of);
  }

 private:
  // Greedy's assignment as a column vector, so CBC prunes from the start; empty when it breaks a
  // capacity (CBC then finds its own first solution).
  static std::vector<double> StartingPoint(const BalanceProblem& problem, const LpModel& model) {
    std::vector<int32_t> assignment = LargestFirst(problem);
    std::vector<double> loads = ControllerLoads(problem, assignment);
    ImproveByMoves(problem, assignment, loads);
    for (int c = 0; c < problem.num_controllers(); ++c) {
      if (loads[c] > problem.controller_capacity[c]) return {};
    }
    std::vector<double> columns(model.load_column + 1, 0.0);
    for (int s = 0; s < problem.num_switches(); ++s) {
      const auto& candidates = problem.potential[s];
      const size_t i =
          std::find(candidates.begin(), candidates.end(), assignment[s]) - candidates.begin();
      columns[model.first_column[s] + i] = 1.0;
    }
    columns[model.load_column] = *std::max_element(loads.begin(), loads.end());
    return columns;
  }

  double time_limit_s_ = 0.0;
  int solver_log_ = 0;
};

}  // namespace titan::balance

TITAN_PLUGIN(titan::BalancePlugin, titan::balance::Ilp, "ilp", "1.0.0",
             "exact optimum by integer programming (CBC), for instances of a few hundred switches")
