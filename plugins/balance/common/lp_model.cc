#include "plugins/balance/common/lp_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "coin/ClpPrimalColumnSteepest.hpp"
#include "coin/ClpSimplex.hpp"
#include "coin/CoinError.hpp"
#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/local_search.h"

namespace titan::balance {
namespace {

// Makes greedy's assignment the starting basis: each switch's assigned x, L, and the slacks of
// every load row but the heaviest one's (which L covers) and of the capacity rows. It is
// non-singular (triangular after ordering) and near-optimal, so primal simplex starts close.
void StartFromGreedy(const BalanceProblem& problem, const LpModel& model, ClpSimplex& simplex) {
  std::vector<int32_t> assignment = LargestFirst(problem);
  std::vector<double> loads = ControllerLoads(problem, assignment);
  ImproveByMoves(problem, assignment, loads);
  const int n = problem.num_switches();
  const int heaviest =
      static_cast<int>(std::max_element(loads.begin(), loads.end()) - loads.begin());
  double* x = simplex.primalColumnSolution();
  for (int column = 0; column < simplex.numberColumns(); ++column) {
    simplex.setColumnStatus(column, ClpSimplex::atLowerBound);
    x[column] = 0.0;
  }
  for (int row = 0; row < simplex.numberRows(); ++row) {
    simplex.setRowStatus(row, ClpSimplex::basic);
  }
  for (int s = 0; s < n; ++s) {
    const std::vector<int32_t>& candidates = problem.potential[s];
    const int column =
        model.first_column[s] +
        static_cast<int>(std::find(candidates.begin(), candidates.end(), assignment[s]) -
                         candidates.begin());
    simplex.setColumnStatus(column, ClpSimplex::basic);
    x[column] = 1.0;
    simplex.setRowStatus(s, ClpSimplex::atLowerBound);
  }
  simplex.setColumnStatus(model.load_column, ClpSimplex::basic);
  x[model.load_column] = loads[heaviest];
  simplex.setRowStatus(n + heaviest, ClpSimplex::atUpperBound);
}

}  // namespace

LpModel BuildMinMaxModel(const BalanceProblem& problem) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const int n = problem.num_switches();
  const int m = problem.num_controllers();
  std::vector<int> capacity_row(m, -1);
  int rows = n + m;
  for (int c = 0; c < m; ++c) {
    if (std::isfinite(problem.controller_capacity[c])) capacity_row[c] = rows++;
  }
  LpModel model;
  model.row_lower.assign(rows, -kInf);
  model.row_upper.assign(rows, 0.0);
  for (int s = 0; s < n; ++s) model.row_lower[s] = model.row_upper[s] = 1.0;
  for (int c = 0; c < m; ++c) {
    if (capacity_row[c] >= 0) model.row_upper[capacity_row[c]] = problem.controller_capacity[c];
  }

  std::vector<double> elements;
  std::vector<int> indices;
  std::vector<CoinBigIndex> starts;
  std::vector<int> lengths;
  auto add_entry = [&](int row, double value) {
    elements.push_back(value);
    indices.push_back(row);
    ++lengths.back();
  };
  for (int s = 0; s < n; ++s) {
    const double w = problem.switch_load[s];
    model.first_column.push_back(static_cast<int>(starts.size()));
    for (int32_t c : problem.potential[s]) {
      starts.push_back(static_cast<CoinBigIndex>(elements.size()));
      lengths.push_back(0);
      add_entry(s, 1.0);
      if (w > 0.0) {
        add_entry(n + c, w);
        if (capacity_row[c] >= 0) add_entry(capacity_row[c], w);
      }
      model.column_lower.push_back(0.0);
      model.column_upper.push_back(w > problem.controller_capacity[c] ? 0.0 : 1.0);
      model.objective.push_back(0.0);
    }
  }
  model.load_column = static_cast<int>(starts.size());
  starts.push_back(static_cast<CoinBigIndex>(elements.size()));
  lengths.push_back(0);
  for (int c = 0; c < m; ++c) add_entry(n + c, -1.0);
  model.column_lower.push_back(0.0);
  model.column_upper.push_back(kInf);
  model.objective.push_back(1.0);

  model.matrix = CoinPackedMatrix(true, rows, static_cast<int>(starts.size()),
                                  static_cast<CoinBigIndex>(elements.size()), elements.data(),
                                  indices.data(), starts.data(), lengths.data());
  return model;
}

absl::StatusOr<FractionalAssignment> SolveRelaxation(const BalanceProblem& problem, int log_level) {
  const LpModel model = BuildMinMaxModel(problem);
  ClpSimplex simplex;
  simplex.setLogLevel(log_level);
  try {
    simplex.loadProblem(model.matrix, model.column_lower.data(), model.column_upper.data(),
                        model.objective.data(), model.row_lower.data(), model.row_upper.data());
    // Dual simplex from the slack basis took about four pivots per switch (10,000 switches:
    // 41,698 pivots, 43 s; 100,000: not done in 300 s). From greedy's basis, within a fraction
    // of a percent of LP*, primal simplex needs a few thousand. Pricing all 800,000 columns with
    // steepest edge then dominated; mode 4 prices partially while that is cheaper.
    StartFromGreedy(problem, model, simplex);
    ClpPrimalColumnSteepest pricing(4);
    simplex.setPrimalColumnPivotAlgorithm(pricing);
    simplex.primal();
  } catch (const CoinError& error) {
    return absl::InternalError(
        absl::StrCat("CLP failed in ", error.methodName(), ": ", error.message()));
  }
  if (simplex.isProvenPrimalInfeasible()) {
    return absl::FailedPreconditionError(
        "the controller capacities admit no assignment, not even a fractional one");
  }
  if (!simplex.isProvenOptimal()) {
    return absl::InternalError(
        absl::StrCat("CLP stopped without an optimal solution of the LP relaxation (status ",
                     simplex.status(), ", secondary status ", simplex.secondaryStatus(), ")"));
  }
  const double* solution = simplex.primalColumnSolution();
  FractionalAssignment result;
  result.objective = solution[model.load_column];
  result.x.resize(problem.num_switches());
  for (int s = 0; s < problem.num_switches(); ++s) {
    const size_t k = problem.potential[s].size();
    result.x[s].assign(solution + model.first_column[s], solution + model.first_column[s] + k);
  }
  return result;
}

}  // namespace titan::balance
