#include "plugins/balance/common/flow_bound.h"

#include <algorithm>
#include <numeric>

#include "plugins/balance/common/instance.h"

namespace titan::balance {
namespace {

// The flow is pushed toward (1 + this) x the current target: the bound is then within this
// of LP*, and the push far cheaper.
constexpr double kBoundPrecision = 1e-3;

// Augmenting paths pass through at most this many controllers: Augment recurses once per
// controller of a path, and this bounds the stack whatever the instance. Any set gives a valid
// bound, so paths cut short can only weaken it.
constexpr int32_t kMaxPathControllers = 4096;

// A fractional assignment as a flow: x_[k] of switch owner_[k]'s load on controller
// candidate_[k], k running over every switch's potential list in turn.
class FractionalFlow {
 public:
  FractionalFlow(const BalanceProblem& problem, const std::vector<int32_t>& start)
      : problem_(problem),
        tolerance_(LoadTolerance(problem)),
        first_(problem.num_switches() + 1, 0),
        load_(ControllerLoads(problem, start)),
        held_(problem.num_controllers()),
        level_controller_(problem.num_controllers()),
        level_switch_(problem.num_switches()),
        next_held_(problem.num_controllers()),
        next_candidate_(problem.num_switches()) {
    for (int s = 0; s < problem.num_switches(); ++s) {
      first_[s + 1] = first_[s] + static_cast<int32_t>(problem.potential[s].size());
      for (int32_t c : problem.potential[s]) {
        candidate_.push_back(c);
        owner_.push_back(s);
        const bool here = c == start[s];
        x_.push_back(here ? problem.switch_load[s] : 0.0);
        listed_.push_back(here);
        if (here) held_[c].push_back(static_cast<int32_t>(candidate_.size() - 1));
      }
    }
  }

  // Each switch at the controller with its largest share, `start`'s on ties.
  std::vector<int32_t> Rounded(const std::vector<int32_t>& start) const {
    std::vector<int32_t> rounded(start);
    for (int s = 0; s < problem_.num_switches(); ++s) {
      double largest = 0.0;
      for (int32_t k = first_[s]; k < first_[s + 1]; ++k) {
        if (candidate_[k] == start[s]) largest = x_[k];
      }
      for (int32_t k = first_[s]; k < first_[s + 1]; ++k) {
        if (x_[k] > largest) largest = x_[k], rounded[s] = candidate_[k];
      }
    }
    return rounded;
  }

  // Moves fractions of switches from controllers above `target` to controllers below it until
  // no augmenting path is left. Returns the controllers that the excess left can reach (no one
  // of them below the target), empty when no excess is left.
  std::vector<int32_t> PushToward(double target) {
    target_ = target;
    while (Levels()) {
      std::fill(next_held_.begin(), next_held_.end(), 0);
      for (int s = 0; s < problem_.num_switches(); ++s) next_candidate_[s] = first_[s];
      for (int32_t c : sources_) {
        while (load_[c] > target_ + tolerance_) {
          const double pushed = Augment(c, load_[c] - target_);
          if (pushed <= 0.0) break;
          load_[c] -= pushed;
        }
      }
    }
    std::vector<int32_t> reached;
    for (int c = 0; c < problem_.num_controllers(); ++c) {
      if (level_controller_[c] >= 0) reached.push_back(c);
    }
    return reached;
  }

 private:
  bool HasRoom(int32_t c) const { return load_[c] < target_ - tolerance_; }

  // Breadth-first levels from the controllers above the target, through the switches they
  // carry part of, to those switches' other controllers; whether one with room was reached.
  bool Levels() {
    std::fill(level_controller_.begin(), level_controller_.end(), -1);
    std::fill(level_switch_.begin(), level_switch_.end(), -1);
    sources_.clear();
    for (int c = 0; c < problem_.num_controllers(); ++c) {
      if (load_[c] > target_ + tolerance_) {
        level_controller_[c] = 0;
        sources_.push_back(c);
      }
    }
    std::vector<int32_t> queue = sources_;
    int32_t sink_level = -1;
    for (size_t head = 0; head < queue.size(); ++head) {
      const int32_t c = queue[head];
      if (sink_level >= 0 && level_controller_[c] + 2 > sink_level) break;
      for (int32_t k : held_[c]) {
        const int32_t s = owner_[k];
        if (x_[k] <= tolerance_ || level_switch_[s] >= 0) continue;
        level_switch_[s] = level_controller_[c] + 1;
        for (int32_t i = first_[s]; i < first_[s + 1]; ++i) {
          const int32_t b = candidate_[i];
          if (level_controller_[b] >= 0) continue;
          level_controller_[b] = level_switch_[s] + 1;
          if (HasRoom(b)) {
            sink_level = level_controller_[b];
          } else if (level_controller_[b] < 2 * kMaxPathControllers) {
            queue.push_back(b);
          }
        }
      }
    }
    return sink_level >= 0;
  }

  // One augmenting path from controller c in the level graph, carrying at most `limit`; the
  // amount it carried (0 when none is left from c, which is then dropped from the levels).
  double Augment(int32_t c, double limit) {
    if (HasRoom(c)) {
      const double pushed = std::min(limit, target_ - load_[c]);
      load_[c] += pushed;
      return pushed;
    }
    std::vector<int32_t>& held = held_[c];
    for (; next_held_[c] < static_cast<int32_t>(held.size()); ++next_held_[c]) {
      const int32_t k = held[next_held_[c]];
      const int32_t s = owner_[k];
      if (x_[k] <= tolerance_ || level_switch_[s] != level_controller_[c] + 1) continue;
      for (; next_candidate_[s] < first_[s + 1]; ++next_candidate_[s]) {
        const int32_t i = next_candidate_[s];
        const int32_t b = candidate_[i];
        if (level_controller_[b] != level_switch_[s] + 1) continue;
        const double pushed = Augment(b, std::min(limit, x_[k]));
        if (pushed <= 0.0) continue;
        x_[k] -= pushed;
        x_[i] += pushed;
        if (!listed_[i]) {
          listed_[i] = 1;
          held_[b].push_back(i);
        }
        return pushed;
      }
    }
    level_controller_[c] = -2;  // a dead end for the rest of this phase
    return 0.0;
  }

  const BalanceProblem& problem_;
  const double tolerance_;
  double target_ = 0.0;
  std::vector<int32_t> first_, candidate_, owner_;
  std::vector<double> x_;
  std::vector<char> listed_;  // whether x_[k]'s pair is in held_ of its controller
  std::vector<double> load_;
  std::vector<std::vector<int32_t>> held_;  // per controller, pairs k with (once) x_[k] > 0
  std::vector<int32_t> level_controller_, level_switch_, sources_;
  std::vector<int32_t> next_held_, next_candidate_;  // Dinic's current arcs
};

}  // namespace

double SetDensity(const BalanceProblem& problem, const std::vector<int32_t>& set) {
  if (set.empty()) return 0.0;
  std::vector<char> inside(problem.num_controllers(), 0);
  for (int32_t c : set) inside[c] = 1;
  double load = 0.0;
  for (int s = 0; s < problem.num_switches(); ++s) {
    const std::vector<int32_t>& candidates = problem.potential[s];
    if (std::all_of(candidates.begin(), candidates.end(), [&](int32_t c) { return inside[c]; })) {
      load += problem.switch_load[s];
    }
  }
  return load / static_cast<double>(set.size());
}

PotentialSetBound DensestSetBound(const BalanceProblem& problem,
                                  const std::vector<int32_t>& start) {
  PotentialSetBound result;
  result.densest.resize(problem.num_controllers());
  std::iota(result.densest.begin(), result.densest.end(), 0);
  const double heaviest =
      problem.switch_load.empty()
          ? 0.0
          : *std::max_element(problem.switch_load.begin(), problem.switch_load.end());
  // The trivial bound first: a Zipf load's heaviest switch is far above sum w / m, and pushing
  // toward the average only to learn that costs most of the run.
  double target = std::max(SetDensity(problem, result.densest), heaviest);
  FractionalFlow flow(problem, start);
  if (target > 0.0) {
    // Each round's target is the density of an explicit set, above the last; Dinkelbach's
    // method needs a handful, the cap guards against rounding errors that stall it. Pushing
    // toward the target itself, a near-balanced network must be balanced exactly, along ever
    // longer paths (29 phases of Dinic on 100,000 switches); kBoundPrecision above it, a few.
    for (int round = 0; round < 100; ++round) {
      std::vector<int32_t> reached = flow.PushToward(target * (1.0 + kBoundPrecision));
      if (reached.empty()) break;
      const double density = SetDensity(problem, reached);
      if (density <= target * (1.0 + 1e-12)) break;
      target = density;
      result.densest = std::move(reached);
    }
  }
  result.bound = target;
  result.rounded = flow.Rounded(start);
  return result;
}

}  // namespace titan::balance
