// The LBDC linear program, shared by the LP relaxation (CLP) and the exact ILP (CBC):
//   minimise L  subject to  sum_{c in P(s)} x_sc = 1          for every switch s
//                           sum_s w_s x_sc - L <= 0             for every controller c
//                           sum_s w_s x_sc <= capacity_c        for every capacitated c
//                           x_sc = 0 where w_s > capacity_c,    x >= 0
// With x binary it is LBDC itself; relaxed, its optimum LP* is a lower bound on the optimum.
#ifndef TITAN_PLUGINS_BALANCE_COMMON_LP_MODEL_H_
#define TITAN_PLUGINS_BALANCE_COMMON_LP_MODEL_H_

#include <cstdint>
#include <vector>

#include "coin/CoinPackedMatrix.hpp"
#include "titan/balance.h"
#include "titan/status.h"

namespace titan::balance {

struct LpModel {
  CoinPackedMatrix matrix;  // column-ordered
  std::vector<double> column_lower, column_upper, objective, row_lower, row_upper;
  // Column of x_{s, P(s)[i]} is first_column[s] + i; the column of L is load_column.
  std::vector<int> first_column;
  int load_column = 0;
};

LpModel BuildMinMaxModel(const BalanceProblem& problem);

// A basic optimal solution of the relaxation, x parallel to problem.potential.
struct FractionalAssignment {
  double objective = 0.0;  // LP*
  std::vector<std::vector<double>> x;
};

// Solves the relaxation with CLP's primal simplex method, started from greedy's assignment, so
// the solution is an extreme point.
// `log_level` 0 silences the solver. The solver sees the loads normalised (Normalise); LP* is
// scaled back less the rounding's error, so it stays a lower bound.
absl::StatusOr<FractionalAssignment> SolveRelaxation(const BalanceProblem& problem, int log_level);

// The fewest-migrations model over the switches `free` (ascending), the others staying where
// `assignment` puts them:
//   minimise  the number of free switches off their controller in `assignment`
//   subject to  sum_{c in P(s)} x_sc = 1                        for every free switch s
//               sum_{s free} w_s x_sc - E <= target - fixed_c     for every controller c
//               sum_{s free} w_s x_sc <= capacity_c - fixed_c     for every capacitated c
// where fixed_c is the load of c's other switches and E >= 0 (load_column) the excess over the
// target. Blocks of first_column follow `free`.
LpModel BuildMigrationModel(const BalanceProblem& problem, const std::vector<int32_t>& assignment,
                            const std::vector<int32_t>& free, double target);

// Solves the relaxation of the migration model in two steps, started from `assignment`: the
// least excess E* (returned as `objective`), then the fewest moves with E <= E*. x is parallel
// to the potential lists of `free`.
absl::StatusOr<FractionalAssignment> SolveMigration(const BalanceProblem& problem,
                                                    const std::vector<int32_t>& assignment,
                                                    const std::vector<int32_t>& free, double target,
                                                    int log_level);

// A lower bound on the switches any assignment must move from `assignment` to bring every
// controller within `target`: the migration model over all switches with E = 0, relaxed, plus
// for each controller c above the target the valid inequality "at least k_c of its switches
// leave", k_c the fewest of them (largest first) whose loads cover its excess. Solved in two
// steps from `assignment` as a basis: the least excess (with those rows), then the fewest moves.
struct FewestMovesBound {
  // False proves that no assignment reaches the target: the relaxation with the rows above,
  // which every such assignment satisfies, has none within it.
  bool reachable = true;
  int64_t moves = 0;  // when reachable: ceil of the relaxation's optimum
  int64_t controllers_above = 0;
};
absl::StatusOr<FewestMovesBound> BoundFewestMoves(const BalanceProblem& problem,
                                                  const std::vector<int32_t>& assignment,
                                                  double target, int log_level);

// x values within this of 0 or 1 count as integral.
inline constexpr double kIntegralTolerance = 1e-7;

}  // namespace titan::balance

#endif  // TITAN_PLUGINS_BALANCE_COMMON_LP_MODEL_H_
