// Issue #40's question: after a load change, how few migrations can bring every controller
// within 1.02 x the densest-set bound, and how low can the maximum go within 5% moves? Builds
// titan-lbdc's Waxman instance (k-center, hops 10, f <= 8, uniform loads, seed 1), takes
// greedy's assignment (the plugin) before change CHANGE and prints:
//   - greedy's re-balance, then chains of up to 10 links (ChainLimits) after it and from the
//     start, each then moving back what fits on its first controller;
//   - ilp's bound on the switches within 1 and 2 neighbour rings of the controller the deepest
//     search left heaviest (they must stay there: a local obstacle would show);
//   - BoundFewestMoves (common/lp_model.h) at the target, and by bisection the least ratio
//     whose bound is within 5% moves (a floor for any assignment within 5%);
//   - with SECONDS > 0, CBC's standalone driver (CbcMain1, all its defaults) on
//       fewest moves:  min sum_s (1 - x[s, current(s)])  s.t. every controller <= T, x binary
//       least maximum: min E  s.t. every controller <= bound + E, moves <= 5%, x binary
//     each with its LP relaxation, CBC's best solution and best bound.
// With "deep", the changes before CHANGE are answered by greedy and then the deeper chains.
//
//   titan_lbdc_fewest_moves_mip SWITCHES CONTROLLERS DRIFT HOTSPOT_FACTOR(0: none) CHANGE(1..5)
//                               SECONDS [deep]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "coin/CbcModel.hpp"
#include "coin/CbcSolver.hpp"
#include "coin/OsiClpSolverInterface.hpp"
#include "core/runtime/plugin_registry.h"
#include "core/topology/switch_graph.h"
#include "plugins/balance/common/chain_moves.h"
#include "plugins/balance/common/flow_bound.h"
#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/lp_model.h"
#include "titan/balance.h"
#include "tools/lbdc/hotspot.h"
#include "tools/lbdc/loads.h"

namespace titan::balance {
namespace {

struct Outcome {
  double lp = 0.0;  // the relaxation's optimum (nan: infeasible)
  double best = 0.0, bound = 0.0;
  bool found = false;
  std::vector<double> x;
};

Outcome SolveByCbc(const LpModel& model, int seconds) {
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(model.matrix, model.column_lower.data(), model.column_upper.data(),
                     model.objective.data(), model.row_lower.data(), model.row_upper.data());
  Outcome outcome;
  solver.initialSolve();
  outcome.lp = solver.isProvenOptimal() ? solver.getObjValue() : std::nan("");
  if (!solver.isProvenOptimal()) return outcome;
  for (int column = 0; column < model.load_column; ++column) solver.setInteger(column);
  CbcModel cbc(solver);
  CbcMain0(cbc);
  const std::string sec = std::to_string(seconds);
  const char* argv[] = {"fewest_moves", "-log", "1", "-sec", sec.c_str(), "-solve", "-quit"};
  CbcMain1(7, argv, cbc);
  outcome.bound = cbc.getBestPossibleObjValue();
  if (cbc.bestSolution() != nullptr) {
    outcome.found = true;
    outcome.best = cbc.getObjValue();
    outcome.x.assign(cbc.bestSolution(), cbc.bestSolution() + model.load_column + 1);
  }
  return outcome;
}

std::vector<int32_t> Rounded(const BalanceProblem& problem, const LpModel& model,
                             const std::vector<double>& x) {
  std::vector<int32_t> of(problem.num_switches());
  for (int s = 0; s < problem.num_switches(); ++s) {
    const double* share = x.data() + model.first_column[s];
    of[s] =
        problem.potential[s][std::max_element(share, share + problem.potential[s].size()) - share];
  }
  return of;
}

constexpr ChainLimits kDeepChains{10, 1000000};

// Moves switches back to their controller in `current` while it has room within `target`;
// returns how many.
int UndoMoves(const BalanceProblem& problem, const std::vector<int32_t>& current, double target,
              Rebalancing& state) {
  int undone = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < problem.num_switches(); ++s) {
      const int32_t home = current[s];
      if (state.assignment[s] != home &&
          state.loads[home] + problem.switch_load[s] <= target + LoadTolerance(problem)) {
        state.Move(s, home);
        ++undone;
        progress = true;
      }
    }
  }
  return undone;
}

// A plugin configured with its defaults.
std::unique_ptr<BalancePlugin> Make(const PluginRegistry& registry, const std::string& name) {
  auto plugin = registry.Create<BalancePlugin>(name).value();
  std::map<std::string, ConfigView::Entry> entries;
  for (const ConfigKey& key : plugin->ConfigKeys()) entries[key.name] = {*key.default_value, ""};
  if (!plugin->Configure(ConfigView(name, entries)).ok()) std::exit(1);
  return plugin;
}

// The switches whose potential sets lie inside the controllers within `rings` neighbour steps
// of `centre` (neighbours share a potential switch) must be watched from there, so the optimum
// of that sub-instance (ilp's proven bound) bounds the whole instance's optimum from below.
double RegionBound(const BalanceProblem& problem, int32_t centre, int rings, BalancePlugin& ilp) {
  std::vector<std::vector<int32_t>> switches_of(problem.num_controllers());
  for (int s = 0; s < problem.num_switches(); ++s) {
    for (int32_t c : problem.potential[s]) switches_of[c].push_back(s);
  }
  std::vector<int32_t> index(problem.num_controllers(), -1);
  std::vector<int32_t> region = {centre};
  index[centre] = 0;
  for (int ring = 0, begin = 0; ring < rings; ++ring) {
    const int end = static_cast<int>(region.size());
    for (int i = begin; i < end; ++i) {
      for (int32_t s : switches_of[region[i]]) {
        for (int32_t c : problem.potential[s]) {
          if (index[c] < 0) index[c] = static_cast<int32_t>(region.size()), region.push_back(c);
        }
      }
    }
    begin = end;
  }
  BalanceProblem part;
  part.controller_capacity.assign(region.size(), INFINITY);
  for (int s = 0; s < problem.num_switches(); ++s) {
    const auto& p = problem.potential[s];
    if (!std::all_of(p.begin(), p.end(), [&](int32_t c) { return index[c] >= 0; })) continue;
    part.switch_load.push_back(problem.switch_load[s]);
    part.potential.emplace_back();
    for (int32_t c : p) part.potential.back().push_back(index[c]);
  }
  if (part.switch_load.empty()) return 0.0;
  const BalanceResult optimum = ilp.Assign(part).value();
  std::printf("  region of %zu controllers within %d rings, %d switches inside: optimum >= %.2f\n",
              region.size(), rings, part.num_switches(), optimum.lower_bound);
  return optimum.lower_bound;
}

// `policy`'s re-balance of `assignment`, applied.
void Apply(BalancePlugin& policy, const BalanceProblem& problem, const RebalanceGoal& goal,
           std::vector<int32_t>& assignment) {
  absl::StatusOr<RebalanceResult> result = policy.Rebalance(problem, assignment, goal);
  if (!result.ok()) {
    std::fprintf(stderr, "%s\n", std::string(result.status().message()).c_str());
    std::exit(1);
  }
  for (const Migration& m : result->moves) assignment[m.switch_index] = m.to;
}

int Main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr,
                 "usage: %s SWITCHES CONTROLLERS DRIFT HOTSPOT_FACTOR CHANGE SECONDS [deep]\n",
                 argv[0]);
    return 2;
  }
  const int switches = std::atoi(argv[1]), controllers = std::atoi(argv[2]);
  const double drift = std::atof(argv[3]), factor = std::atof(argv[4]);
  const int change = std::atoi(argv[5]), seconds = std::atoi(argv[6]);
  // "deep": the changes before `change` are answered by greedy, then chains of up to 10 links.
  const bool deep_history = argc == 8 && std::string(argv[7]) == "deep";
  std::mt19937_64 random(1);
  auto topology =
      topology::MakeTopology(absl::StrCat("waxman:", switches, ",0.4,0.6,8"), random).value();
  auto sites = topology::PlaceControllers(topology, "k-center", controllers, {}, random).value();
  BalanceProblem problem = topology::PotentialControllers(topology, sites, 10, 8).value();
  auto snapshots = lbdc::MakeLoads("uniform:1,100", topology.size(), 5, drift, random).value();
  if (factor > 0) {
    const auto region = lbdc::HotRegion(topology, 0.07, random);
    if (!lbdc::HeatRegion(region, factor, snapshots).ok()) return 1;
  }
  auto registry = PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR}).value();
  auto greedy = registry->Create<BalancePlugin>("greedy").value();
  problem.switch_load = snapshots[0];
  std::vector<int32_t> current = greedy->Assign(problem).value().controller_of;
  const RebalanceGoal goal;
  for (int step = 1; step < change; ++step) {
    problem.switch_load = snapshots[step];
    Apply(*greedy, problem, goal, current);
    if (deep_history) {
      Rebalancing deeper(problem, current);
      ReachTarget(deeper, goal.slack * DensestSetBound(problem, current).bound,
                  std::numeric_limits<int64_t>::max(), kDeepChains);
      current = deeper.assignment;
    }
  }
  problem.switch_load = snapshots[change];
  const double bound = DensestSetBound(problem, current).bound;
  const double target = goal.slack * bound;
  const Normalised normalised = Normalise(problem);
  const double unit = normalised.unit;
  std::vector<int32_t> all(problem.num_switches());
  std::iota(all.begin(), all.end(), 0);
  std::printf("change %d: bound %.2f, target %.2f, current max %.4f x bound\n", change, bound,
              target, MaxLoad(problem, current) / bound);
  std::vector<int32_t> after = current;
  Apply(*greedy, problem, goal, after);
  int greedy_moves = 0;
  for (int s = 0; s < problem.num_switches(); ++s) greedy_moves += after[s] != current[s];
  std::printf("greedy's re-balance: %d moves, max %.4f x bound\n", greedy_moves,
              MaxLoad(problem, after) / bound);
  std::vector<int32_t> deepest = after;
  for (const std::vector<int32_t>* from : {&after, &current}) {
    // then chains of up to 10 links, 10^6 steps per search
    const auto start = std::chrono::steady_clock::now();
    Rebalancing deeper(problem, *from);
    ReachTarget(deeper, target, std::numeric_limits<int64_t>::max(), kDeepChains);
    int moves = 0;
    for (int s = 0; s < problem.num_switches(); ++s) moves += deeper.assignment[s] != current[s];
    std::printf("%s chains of up to 10 links: %d moves in all, max %.4f x bound, %.1f s\n",
                from == &after ? "greedy's, then" : "from the current assignment,", moves,
                deeper.MaxLoad() / bound,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::fflush(stdout);
    if (deeper.MaxLoad() < MaxLoad(problem, deepest)) deepest = deeper.assignment;
    const int undone = UndoMoves(problem, current, target, deeper);
    std::printf("  moving back what fits: %d moves in all, max %.4f x bound\n", moves - undone,
                deeper.MaxLoad() / bound);
  }
  {  // where the deepest search stopped: is its heaviest controller's region integrally tight?
    const std::vector<double> loads = ControllerLoads(problem, deepest);
    const int32_t heaviest =
        static_cast<int32_t>(std::max_element(loads.begin(), loads.end()) - loads.begin());
    auto ilp = Make(*registry, "ilp");
    for (int rings = 1; rings <= 2; ++rings) {
      std::printf("heaviest controller %d: its region's optimum >= %.4f x bound\n", heaviest,
                  RegionBound(problem, heaviest, rings, *ilp) / bound);
      std::fflush(stdout);
    }
  }

  const auto start = std::chrono::steady_clock::now();
  const FewestMovesBound lp_bound = BoundFewestMoves(problem, current, target, 0).value();
  std::printf("BoundFewestMoves: %s, %lld moves, %lld controllers above, %.2f s\n",
              lp_bound.reachable ? "reachable" : "UNREACHABLE",
              static_cast<long long>(lp_bound.moves),
              static_cast<long long>(lp_bound.controllers_above),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  std::fflush(stdout);
  {  // the least ratio r whose bound is within 5% moves: no assignment within 5% does better
    const double budget = 0.05 * problem.num_switches();
    double low = 1.0, high = MaxLoad(problem, current) / bound;
    for (int step = 0; step < 12; ++step) {
      const double r = (low + high) / 2;
      const FewestMovesBound at = BoundFewestMoves(problem, current, r * bound, 0).value();
      (at.reachable && at.moves <= budget ? high : low) = r;
    }
    std::printf("least ratio any assignment within 5%% moves may reach (bound): >= %.4f\n", low);
    std::fflush(stdout);
  }
  if (seconds == 0) return 0;
  LpModel fewest = BuildMigrationModel(normalised.problem, current, all, target / unit);
  fewest.column_upper[fewest.load_column] = 0.0;
  Outcome moves = SolveByCbc(fewest, seconds);
  std::printf(
      "fewest moves to %.2f x bound: LP bound %.1f, CBC best %s, CBC bound %.1f\n", goal.slack,
      moves.lp,
      moves.found
          ? absl::StrCat(moves.best, " (max ",
                         MaxLoad(problem, Rounded(problem, fewest, moves.x)) / bound, " x bound)")
                .c_str()
          : "none",
      moves.bound);

  const double budget = 0.05 * problem.num_switches();
  LpModel least = BuildMigrationModel(normalised.problem, current, all, bound / unit);
  std::vector<double> cost = least.objective;
  std::fill(least.objective.begin(), least.objective.end(), 0.0);
  least.objective[least.load_column] = 1.0;
  // The budget row: sum of move costs <= budget.
  CoinPackedVector row;
  for (int column = 0; column < least.load_column; ++column) {
    if (cost[column] > 0) row.insert(column, 1.0);
  }
  least.matrix.appendRow(row);
  least.row_lower.push_back(-COIN_DBL_MAX);
  least.row_upper.push_back(budget);
  Outcome excess = SolveByCbc(least, seconds);
  std::printf("least max within %.0f moves: LP bound %.4f x bound, CBC best %s, CBC bound %.4f\n",
              budget, 1 + excess.lp * unit / bound,
              excess.found ? absl::StrCat(1 + excess.best * unit / bound).c_str() : "none",
              1 + excess.bound * unit / bound);
  return 0;
}

}  // namespace
}  // namespace titan::balance

int main(int argc, char** argv) { return titan::balance::Main(argc, argv); }
