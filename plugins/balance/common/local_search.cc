#include "plugins/balance/common/local_search.h"

#include <algorithm>
#include <numeric>

#include "plugins/balance/common/instance.h"

namespace titan::balance {
namespace {

// The lightest potential controller of `s` other than its own that has room for it, or -1.
int32_t LightestOther(const BalanceProblem& problem, const std::vector<double>& loads, int s,
                      int32_t own) {
  int32_t best = -1;
  for (int32_t c : problem.potential[s]) {
    if (c == own || !HasRoom(problem, loads, c, problem.switch_load[s])) continue;
    if (best < 0 || loads[c] < loads[best]) best = c;
  }
  return best;
}

}  // namespace

std::vector<int32_t> LargestFirst(const BalanceProblem& problem) {
  const int n = problem.num_switches();
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return problem.switch_load[a] > problem.switch_load[b]; });
  std::vector<double> loads(problem.num_controllers(), 0.0);
  std::vector<int32_t> assignment(n, -1);
  for (int s : order) {
    int32_t best = LightestOther(problem, loads, s, -1);
    if (best < 0) {  // no controller has room: the least loaded overflows least
      for (int32_t c : problem.potential[s]) {
        if (best < 0 || loads[c] < loads[best]) best = c;
      }
    }
    assignment[s] = best;
    loads[best] += problem.switch_load[s];
  }
  return assignment;
}

int64_t ImproveByMoves(const BalanceProblem& problem, std::vector<int32_t>& assignment,
                       std::vector<double>& loads) {
  const double tolerance = LoadTolerance(problem);
  int64_t moves = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < problem.num_switches(); ++s) {
      const double w = problem.switch_load[s];
      const int32_t from = assignment[s];
      const int32_t to = LightestOther(problem, loads, s, from);
      if (to < 0 || loads[to] + w >= loads[from] - tolerance) continue;
      loads[from] -= w;
      loads[to] += w;
      assignment[s] = to;
      ++moves;
      moved = true;
    }
  }
  return moves;
}

std::optional<Migration> FindImprovingMove(const BalanceProblem& problem,
                                           const std::vector<int32_t>& assignment) {
  const std::vector<double> loads = ControllerLoads(problem, assignment);
  const double tolerance = LoadTolerance(problem);
  for (int s = 0; s < problem.num_switches(); ++s) {
    const int32_t from = assignment[s];
    const int32_t to = LightestOther(problem, loads, s, from);
    if (to >= 0 && loads[to] + problem.switch_load[s] < loads[from] - tolerance) {
      return Migration{s, from, to};
    }
  }
  return std::nullopt;
}

}  // namespace titan::balance
