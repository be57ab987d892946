#include "plugins/balance/common/lp_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "coin/ClpPrimalColumnSteepest.hpp"
#include "coin/ClpSimplex.hpp"
#include "coin/CoinError.hpp"
#include "coin/CoinPackedVector.hpp"
#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/local_search.h"

namespace titan::balance {
namespace {

// Makes `chosen` (an index into each block's columns) the starting basis: each block's chosen x,
// the load column in `tight_row`, and the slacks of every other row. It is non-singular
// (triangular after ordering); from a near-optimal assignment primal simplex starts close.
void SetStartingBasis(const LpModel& model, const std::vector<int>& chosen, int tight_row,
                      double load_value, ClpSimplex& simplex) {
  double* x = simplex.primalColumnSolution();
  for (int column = 0; column < simplex.numberColumns(); ++column) {
    simplex.setColumnStatus(column, ClpSimplex::atLowerBound);
    x[column] = 0.0;
  }
  for (int row = 0; row < simplex.numberRows(); ++row) {
    simplex.setRowStatus(row, ClpSimplex::basic);
  }
  for (size_t i = 0; i < chosen.size(); ++i) {
    const int column = model.first_column[i] + chosen[i];
    simplex.setColumnStatus(column, ClpSimplex::basic);
    x[column] = 1.0;
    simplex.setRowStatus(static_cast<int>(i), ClpSimplex::atLowerBound);
  }
  simplex.setColumnStatus(model.load_column, ClpSimplex::basic);
  x[model.load_column] = load_value;
  simplex.setRowStatus(tight_row, ClpSimplex::atUpperBound);
}

// Where `assignment` puts each switch of `switches`, as an index into its potential list.
std::vector<int> Positions(const BalanceProblem& problem, const std::vector<int32_t>& switches,
                           const std::vector<int32_t>& assignment) {
  std::vector<int> chosen;
  for (int32_t s : switches) {
    const std::vector<int32_t>& candidates = problem.potential[s];
    chosen.push_back(static_cast<int>(
        std::find(candidates.begin(), candidates.end(), assignment[s]) - candidates.begin()));
  }
  return chosen;
}

// Runs primal simplex with partial pricing, turning CLP's exceptions and verdicts into errors.
absl::Status RunPrimal(ClpSimplex& simplex, const char* what) {
  try {
    // Pricing all 800,000 columns of a 100k instance with steepest edge dominated; mode 4
    // prices partially while that is cheaper.
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
    return absl::InternalError(absl::StrCat("CLP stopped without an optimal solution of ", what,
                                            " (status ", simplex.status(), ", secondary status ",
                                            simplex.secondaryStatus(), ")"));
  }
  return absl::OkStatus();
}

std::vector<std::vector<double>> Shares(const BalanceProblem& problem,
                                        const std::vector<int32_t>& switches, const LpModel& model,
                                        const double* solution) {
  std::vector<std::vector<double>> x(switches.size());
  for (size_t i = 0; i < switches.size(); ++i) {
    const double* first = solution + model.first_column[i];
    x[i].assign(first, first + problem.potential[switches[i]].size());
  }
  return x;
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

absl::StatusOr<FractionalAssignment> SolveRelaxation(const BalanceProblem& original,
                                                     int log_level) {
  const Normalised normalised = Normalise(original);
  const BalanceProblem& problem = normalised.problem;
  const LpModel model = BuildMinMaxModel(problem);
  ClpSimplex simplex;
  simplex.setLogLevel(log_level);
  simplex.loadProblem(model.matrix, model.column_lower.data(), model.column_upper.data(),
                      model.objective.data(), model.row_lower.data(), model.row_upper.data());
  // Dual simplex from the slack basis took about four pivots per switch (10,000 switches:
  // 41,698 pivots, 43 s; 100,000: not done in 300 s). From greedy's basis, within a fraction
  // of a percent of LP*, primal simplex needs a few thousand.
  std::vector<int32_t> greedy = LargestFirst(problem);
  std::vector<double> loads = ControllerLoads(problem, greedy);
  ImproveByMoves(problem, greedy, loads);
  std::vector<int32_t> all(problem.num_switches());
  std::iota(all.begin(), all.end(), 0);
  const int heaviest =
      static_cast<int>(std::max_element(loads.begin(), loads.end()) - loads.begin());
  SetStartingBasis(model, Positions(problem, all, greedy), problem.num_switches() + heaviest,
                   loads[heaviest], simplex);
  TITAN_RETURN_IF_ERROR(RunPrimal(simplex, "the LP relaxation"));
  FractionalAssignment result;
  // The bound holds for the original loads once the rounding's error is taken off.
  result.objective =
      std::max(0.0, (simplex.primalColumnSolution()[model.load_column] - normalised.error) *
                        normalised.unit);
  result.x = Shares(problem, all, model, simplex.primalColumnSolution());
  return result;
}

LpModel BuildMigrationModel(const BalanceProblem& problem, const std::vector<int32_t>& assignment,
                            const std::vector<int32_t>& free, double target) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const int n = static_cast<int>(free.size());
  const int m = problem.num_controllers();
  std::vector<double> fixed = ControllerLoads(problem, assignment);
  for (int32_t s : free) fixed[assignment[s]] -= problem.switch_load[s];
  std::vector<int> capacity_row(m, -1);
  int rows = n + m;
  for (int c = 0; c < m; ++c) {
    if (std::isfinite(problem.controller_capacity[c])) capacity_row[c] = rows++;
  }
  LpModel model;
  model.row_lower.assign(rows, -kInf);
  model.row_upper.assign(rows, 0.0);
  for (int i = 0; i < n; ++i) model.row_lower[i] = model.row_upper[i] = 1.0;
  for (int c = 0; c < m; ++c) {
    model.row_upper[n + c] = target - fixed[c];
    if (capacity_row[c] >= 0) {
      model.row_upper[capacity_row[c]] = problem.controller_capacity[c] - fixed[c];
    }
  }
  std::vector<double> elements;
  std::vector<int> indices;
  std::vector<CoinBigIndex> starts;
  auto add_column = [&](double lower, double upper, double cost) {
    starts.push_back(static_cast<CoinBigIndex>(elements.size()));
    model.column_lower.push_back(lower);
    model.column_upper.push_back(upper);
    model.objective.push_back(cost);
  };
  auto add_entry = [&](int row, double value) {
    elements.push_back(value);
    indices.push_back(row);
  };
  for (int i = 0; i < n; ++i) {
    const int32_t s = free[i];
    const double w = problem.switch_load[s];
    model.first_column.push_back(static_cast<int>(starts.size()));
    for (int32_t c : problem.potential[s]) {
      add_column(0.0, w > problem.controller_capacity[c] ? 0.0 : 1.0, c == assignment[s] ? 0 : 1);
      add_entry(i, 1.0);
      if (w > 0.0) {
        add_entry(n + c, w);
        if (capacity_row[c] >= 0) add_entry(capacity_row[c], w);
      }
    }
  }
  model.load_column = static_cast<int>(starts.size());
  add_column(0.0, kInf, 0.0);
  for (int c = 0; c < m; ++c) add_entry(n + c, -1.0);
  starts.push_back(static_cast<CoinBigIndex>(elements.size()));
  std::vector<int> lengths(starts.size() - 1);
  for (size_t j = 0; j + 1 < starts.size(); ++j)
    lengths[j] = static_cast<int>(starts[j + 1] - starts[j]);
  model.matrix = CoinPackedMatrix(true, rows, static_cast<int>(lengths.size()),
                                  static_cast<CoinBigIndex>(elements.size()), elements.data(),
                                  indices.data(), starts.data(), lengths.data());
  return model;
}

namespace {

// Loads `model` (the migration model of `free`) into `simplex` to find the least excess over
// `target` first, started from `assignment`'s basis; returns the move costs of the second solve.
std::vector<double> LoadLeastExcess(const BalanceProblem& problem,
                                    const std::vector<int32_t>& assignment,
                                    const std::vector<int32_t>& free, double target, int log_level,
                                    LpModel& model, ClpSimplex& simplex) {
  std::vector<double> move_cost = model.objective;
  std::fill(model.objective.begin(), model.objective.end(), 0.0);
  model.objective[model.load_column] = 1.0;
  simplex.setLogLevel(log_level);
  simplex.loadProblem(model.matrix, model.column_lower.data(), model.column_upper.data(),
                      model.objective.data(), model.row_lower.data(), model.row_upper.data());
  const std::vector<double> loads = ControllerLoads(problem, assignment);
  const int heaviest =
      static_cast<int>(std::max_element(loads.begin(), loads.end()) - loads.begin());
  SetStartingBasis(model, Positions(problem, free, assignment),
                   static_cast<int>(free.size()) + heaviest,
                   std::max(0.0, loads[heaviest] - target), simplex);
  return move_cost;
}

// The excess capped at `cap`, the fewest moves that keep it.
absl::Status SolveFewestMoves(const LpModel& model, const std::vector<double>& move_cost,
                              double cap, const char* what, ClpSimplex& simplex) {
  simplex.setColumnUpper(model.load_column, cap);
  for (int column = 0; column < static_cast<int>(move_cost.size()); ++column) {
    simplex.setObjectiveCoefficient(column, move_cost[column]);
  }
  return RunPrimal(simplex, what);
}

}  // namespace

absl::StatusOr<FractionalAssignment> SolveMigration(const BalanceProblem& original,
                                                    const std::vector<int32_t>& assignment,
                                                    const std::vector<int32_t>& free, double target,
                                                    int log_level) {
  const Normalised normalised = Normalise(original);
  const BalanceProblem& problem = normalised.problem;
  target /= normalised.unit;
  LpModel model = BuildMigrationModel(problem, assignment, free, target);
  // First the least excess E over the target, then the fewest moves that keep it.
  ClpSimplex simplex;
  const std::vector<double> move_cost =
      LoadLeastExcess(problem, assignment, free, target, log_level, model, simplex);
  TITAN_RETURN_IF_ERROR(RunPrimal(simplex, "the migration LP (least excess)"));
  const double least_excess = simplex.primalColumnSolution()[model.load_column];
  TITAN_RETURN_IF_ERROR(SolveFewestMoves(model, move_cost, least_excess + LoadTolerance(problem),
                                         "the migration LP (fewest moves)", simplex));
  FractionalAssignment result;
  result.objective = least_excess * normalised.unit;
  result.x = Shares(problem, free, model, simplex.primalColumnSolution());
  return result;
}

namespace {

// The rows "at least k_c of c's switches leave" for every controller c above `target`, each
// as sum of their stay columns <= (switches on c) - k_c; returns how many controllers.
int AddShedRows(const BalanceProblem& problem, const std::vector<int32_t>& assignment,
                double target, LpModel& model) {
  const double tolerance = LoadTolerance(problem);
  const std::vector<double> loads = ControllerLoads(problem, assignment);
  std::vector<std::vector<int32_t>> held(problem.num_controllers());
  for (int s = 0; s < problem.num_switches(); ++s) held[assignment[s]].push_back(s);
  int above = 0;
  for (int c = 0; c < problem.num_controllers(); ++c) {
    const double excess = loads[c] - target;
    if (excess <= tolerance) continue;
    ++above;
    std::vector<int32_t>& switches = held[c];
    std::sort(switches.begin(), switches.end(), [&](int32_t a, int32_t b) {
      return problem.switch_load[a] > problem.switch_load[b];
    });
    int leave = 0;
    // All of them when they cannot cover it (a negative target).
    for (double shed = 0.0; shed < excess - tolerance && leave < std::ssize(switches); ++leave) {
      shed += problem.switch_load[switches[leave]];
    }
    CoinPackedVector row;
    for (int32_t s : switches) {
      const std::vector<int32_t>& candidates = problem.potential[s];
      const int position =
          static_cast<int>(std::find(candidates.begin(), candidates.end(), c) - candidates.begin());
      row.insert(model.first_column[s] + position, 1.0);
    }
    model.matrix.appendRow(row);
    model.row_lower.push_back(-std::numeric_limits<double>::infinity());
    model.row_upper.push_back(static_cast<double>(switches.size() - leave));
  }
  return above;
}

}  // namespace

absl::StatusOr<FewestMovesBound> BoundFewestMoves(const BalanceProblem& original,
                                                  const std::vector<int32_t>& assignment,
                                                  double target, int log_level) {
  const Normalised normalised = Normalise(original);
  const BalanceProblem& problem = normalised.problem;
  target /= normalised.unit;
  std::vector<int32_t> all(problem.num_switches());
  std::iota(all.begin(), all.end(), 0);
  LpModel model = BuildMigrationModel(problem, assignment, all, target);
  FewestMovesBound result;
  result.controllers_above = AddShedRows(problem, assignment, target, model);
  if (result.controllers_above == 0) return result;
  ClpSimplex simplex;
  const std::vector<double> move_cost =
      LoadLeastExcess(problem, assignment, all, target, log_level, model, simplex);
  const absl::Status least_excess = RunPrimal(simplex, "the fewest-moves bound (least excess)");
  if (absl::IsFailedPrecondition(least_excess)) {  // a controller cannot shed k_c of its switches
    result.reachable = false;
    return result;
  }
  TITAN_RETURN_IF_ERROR(least_excess);
  // The normalised loads are rounded by at most `error` per controller.
  if (simplex.primalColumnSolution()[model.load_column] >
      normalised.error + LoadTolerance(problem)) {
    result.reachable = false;
    return result;
  }
  TITAN_RETURN_IF_ERROR(SolveFewestMoves(model, move_cost,
                                         normalised.error + LoadTolerance(problem),
                                         "the fewest-moves bound (fewest moves)", simplex));
  result.moves = static_cast<int64_t>(std::ceil(simplex.objectiveValue() - 1e-6));
  return result;
}

}  // namespace titan::balance
