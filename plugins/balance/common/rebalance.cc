#include "plugins/balance/common/rebalance.h"

#include <algorithm>
#include <cmath>
#include <queue>

#include "absl/strings/str_cat.h"
#include "plugins/balance/common/chain_moves.h"
#include "plugins/balance/common/flow_bound.h"
#include "plugins/balance/common/hot_region.h"
#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/local_search.h"

namespace titan::balance {

absl::StatusOr<double> GoalBound(const RebalanceGoal& goal, double own_bound) {
  if (!std::isfinite(goal.slack) || goal.slack < 1.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rebalance slack ", goal.slack, ": expected a finite number >= 1"));
  }
  if (!std::isfinite(goal.lower_bound) || goal.lower_bound < 0.0) {
    return absl::InvalidArgumentError(absl::StrCat("rebalance lower bound ", goal.lower_bound,
                                                   ": expected a finite number >= 0"));
  }
  if (goal.max_moves < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rebalance budget ", goal.max_moves, " moves: expected >= 0"));
  }
  return std::max(goal.lower_bound, own_bound);
}

Rebalancing::Rebalancing(const BalanceProblem& problem, const std::vector<int32_t>& current)
    : problem(problem), assignment(current), loads(ControllerLoads(problem, current)) {}

double Rebalancing::MaxLoad() const {
  return loads.empty() ? 0.0 : *std::max_element(loads.begin(), loads.end());
}

void Rebalancing::Move(int32_t s, int32_t to) {
  const int32_t from = assignment[s];
  loads[from] -= problem.switch_load[s];
  loads[to] += problem.switch_load[s];
  assignment[s] = to;
  moves.push_back({s, from, to});
}

namespace {

// The best single move off `c` (see MoveTowardTarget), or {-1, -1}.
std::pair<int32_t, int32_t> BestMoveOff(const Rebalancing& state, int32_t c,
                                        const std::vector<int32_t>& held, double target,
                                        double tolerance) {
  const BalanceProblem& problem = state.problem;
  const std::vector<double>& loads = state.loads;
  const double excess = loads[c] - target;
  int32_t clear_s = -1, clear_to = -1;  // smallest switch that clears the excess and fits
  int32_t fit_s = -1, fit_to = -1;      // largest switch that fits
  int32_t lower_s = -1, lower_to = -1;  // improving move with the lowest resulting pair max
  double lower_max = loads[c] - tolerance;
  for (int32_t s : held) {
    const double w = problem.switch_load[s];
    if (w <= 0.0) continue;
    int32_t lightest = -1;
    for (int32_t b : problem.potential[s]) {
      if (b == c || !HasRoom(problem, loads, b, w)) continue;
      if (lightest < 0 || loads[b] < loads[lightest]) lightest = b;
    }
    if (lightest < 0) continue;
    const double after = loads[lightest] + w;
    if (after <= target) {
      if (w >= excess && (clear_s < 0 || w < problem.switch_load[clear_s])) {
        clear_s = s, clear_to = lightest;
      }
      if (fit_s < 0 || w > problem.switch_load[fit_s]) fit_s = s, fit_to = lightest;
    }
    // Only to a controller within the target: between two above it a move lowers no excess,
    // and such moves passed switches back and forth (10% of them in one change of drift 1).
    const double pair_max = std::max(after, loads[c] - w);
    if (loads[lightest] <= target && after < loads[c] - tolerance && pair_max < lower_max) {
      lower_max = pair_max, lower_s = s, lower_to = lightest;
    }
  }
  if (clear_s >= 0) return {clear_s, clear_to};
  if (fit_s >= 0) return {fit_s, fit_to};
  return {lower_s, lower_to};
}

}  // namespace

void MoveTowardTarget(Rebalancing& state, double target, int64_t max_moves) {
  const BalanceProblem& problem = state.problem;
  const double tolerance = LoadTolerance(problem);
  std::vector<std::vector<int32_t>> held(problem.num_controllers());
  for (int s = 0; s < problem.num_switches(); ++s) held[state.assignment[s]].push_back(s);
  // A controller no single move lowers may become lowerable when a neighbour sheds a switch, so
  // the controllers above the target are taken again until a pass moves nothing.
  int64_t made = 0;
  for (int64_t before = -1; made != before && made < max_moves;) {
    before = made;
    std::priority_queue<std::pair<double, int32_t>> heaviest;
    for (int32_t c = 0; c < problem.num_controllers(); ++c) {
      if (state.loads[c] > target + tolerance) heaviest.emplace(state.loads[c], c);
    }
    while (!heaviest.empty() && made < max_moves) {
      const auto [load, c] = heaviest.top();
      heaviest.pop();
      if (load != state.loads[c] || load <= target + tolerance) continue;  // a stale entry
      const auto [s, to] = BestMoveOff(state, c, held[c], target, tolerance);
      if (s < 0) continue;  // no single move lowers c, for now
      state.Move(s, to);
      ++made;
      std::erase(held[c], s);
      held[to].push_back(s);
      if (state.loads[c] > target + tolerance) heaviest.emplace(state.loads[c], c);
      if (state.loads[to] > target + tolerance) heaviest.emplace(state.loads[to], to);
    }
  }
}

void ApplyImproving(Rebalancing& state, const std::vector<Migration>& proposed, int64_t max_moves) {
  const double tolerance = LoadTolerance(state.problem);
  std::vector<char> done(proposed.size(), 0);
  int64_t made = 0;
  for (bool progress = true; progress && made < max_moves;) {
    progress = false;
    for (size_t i = 0; i < proposed.size() && made < max_moves; ++i) {
      const Migration& move = proposed[i];
      if (done[i]) continue;
      if (state.assignment[move.switch_index] != move.from) {
        done[i] = 1;
        continue;
      }
      const double w = state.problem.switch_load[move.switch_index];
      if (!HasRoom(state.problem, state.loads, move.to, w) ||
          state.loads[move.to] + w >= state.loads[move.from] - tolerance) {
        continue;
      }
      state.Move(move.switch_index, move.to);
      done[i] = 1;
      ++made;
      progress = true;
    }
  }
}

absl::StatusOr<RebalanceResult> RebalanceTarget(const BalanceProblem& problem,
                                                const std::vector<int32_t>& current,
                                                const RebalanceGoal& goal) {
  RebalanceResult result;
  TITAN_ASSIGN_OR_RETURN(result.lower_bound, GoalBound(goal, TrivialLowerBound(problem)));
  result.target = goal.slack * result.lower_bound;
  if (MaxLoad(problem, current) <= result.target + LoadTolerance(problem)) return result;
  TITAN_ASSIGN_OR_RETURN(result.lower_bound,
                         GoalBound(goal, DensestSetBound(problem, current).bound));
  result.target = goal.slack * result.lower_bound;
  return result;
}

void ReachTarget(Rebalancing& state, double target, int64_t max_moves) {
  ReachTarget(state, target, max_moves, ChainLimits{});
}

void ReachTarget(Rebalancing& state, double target, int64_t max_moves, const ChainLimits& limits) {
  const double tolerance = LoadTolerance(state.problem);
  auto left = [&] { return max_moves - static_cast<int64_t>(state.moves.size()); };
  MoveTowardTarget(state, target, left());
  // Chains that clear a controller's excess first: one chain there saves several partial ones.
  for (bool clearing : {true, false}) {
    while (state.MaxLoad() > target + tolerance && left() > 0) {
      const int64_t chains = MoveChainsTowardTarget(state, target, left(), clearing, limits);
      if (chains == 0) break;
      MoveTowardTarget(state, target, left());
    }
  }
}

absl::StatusOr<RebalanceResult> RebalanceByMoves(const BalanceProblem& problem,
                                                 const std::vector<int32_t>& current,
                                                 const RebalanceGoal& goal) {
  TITAN_RETURN_IF_ERROR(ValidateProblem(problem));
  TITAN_RETURN_IF_ERROR(ValidateAssignment(problem, current));
  TITAN_ASSIGN_OR_RETURN(RebalanceResult result, RebalanceTarget(problem, current, goal));
  Rebalancing state(problem, current);
  TITAN_RETURN_IF_ERROR(ReachTargetOrResolve(state, result.target, goal.max_moves));
  result.moves = std::move(state.moves);
  return result;
}

std::vector<int32_t> SwitchesAbove(const Rebalancing& state, double target) {
  const double tolerance = LoadTolerance(state.problem);
  std::vector<int32_t> switches;
  for (int s = 0; s < state.problem.num_switches(); ++s) {
    if (state.loads[state.assignment[s]] > target + tolerance) switches.push_back(s);
  }
  return switches;
}

}  // namespace titan::balance
