#include "plugins/balance/common/instance.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace titan::balance {

absl::Status ValidateProblem(const BalanceProblem& problem) {
  const int n = problem.num_switches();
  const int m = problem.num_controllers();
  if (m == 0) return absl::InvalidArgumentError("the instance has no controllers");
  if (static_cast<int>(problem.potential.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("the instance has ", n, " switch loads but ", problem.potential.size(),
                     " potential-controller lists; expected one list per switch"));
  }
  if (!problem.distance.empty() && static_cast<int>(problem.distance.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("the instance has ", n, " switches but ", problem.distance.size(),
                     " distance lists; expected none or one per switch"));
  }
  for (int c = 0; c < m; ++c) {
    const double capacity = problem.controller_capacity[c];
    if (std::isnan(capacity) || capacity <= 0.0) {
      return absl::InvalidArgumentError(absl::StrCat("controller ", c, " has capacity ", capacity,
                                                     "; expected > 0 (or +inf for none)"));
    }
  }
  std::vector<int> seen(m, -1);
  double total = 0.0;
  for (int s = 0; s < n; ++s) {
    const double load = problem.switch_load[s];
    if (!std::isfinite(load) || load < 0.0) {
      return absl::InvalidArgumentError(
          absl::StrCat("switch ", s, " has load ", load, "; expected a finite load >= 0"));
    }
    total += load;
    if (!std::isfinite(total)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the loads of switches 0..", s, " sum beyond the largest double (",
          std::numeric_limits<double>::max(), "); expected loads whose sum is finite"));
    }
    const std::vector<int32_t>& candidates = problem.potential[s];
    if (candidates.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("switch ", s, " has no potential controller (none within the hop limit)"));
    }
    for (int32_t c : candidates) {
      if (c < 0 || c >= m) {
        return absl::InvalidArgumentError(absl::StrCat("switch ", s, " lists controller ", c,
                                                       ", but the instance has ", m,
                                                       " controllers (0..", m - 1, ")"));
      }
      if (seen[c] == s) {
        return absl::InvalidArgumentError(
            absl::StrCat("switch ", s, " lists controller ", c, " twice"));
      }
      seen[c] = s;
    }
    if (!problem.distance.empty() && problem.distance[s].size() != candidates.size()) {
      return absl::InvalidArgumentError(absl::StrCat("switch ", s, " has ", candidates.size(),
                                                     " potential controllers but ",
                                                     problem.distance[s].size(), " distances"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateAssignment(const BalanceProblem& problem,
                                const std::vector<int32_t>& assignment) {
  if (static_cast<int>(assignment.size()) != problem.num_switches()) {
    return absl::InvalidArgumentError(absl::StrCat("the assignment has ", assignment.size(),
                                                   " entries; expected one per switch (",
                                                   problem.num_switches(), ")"));
  }
  for (int s = 0; s < problem.num_switches(); ++s) {
    const std::vector<int32_t>& candidates = problem.potential[s];
    if (std::find(candidates.begin(), candidates.end(), assignment[s]) == candidates.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("switch ", s, " is assigned to controller ", assignment[s],
                       ", which is not one of its potential controllers"));
    }
  }
  return absl::OkStatus();
}

std::vector<double> ControllerLoads(const BalanceProblem& problem,
                                    const std::vector<int32_t>& assignment) {
  std::vector<double> loads(problem.num_controllers(), 0.0);
  for (int s = 0; s < problem.num_switches(); ++s) loads[assignment[s]] += problem.switch_load[s];
  return loads;
}

double MaxLoad(const BalanceProblem& problem, const std::vector<int32_t>& assignment) {
  std::vector<double> loads = ControllerLoads(problem, assignment);
  return loads.empty() ? 0.0 : *std::max_element(loads.begin(), loads.end());
}

double TrivialLowerBound(const BalanceProblem& problem) {
  double largest = 0.0;
  double total = 0.0;
  for (double w : problem.switch_load) {
    largest = std::max(largest, w);
    total += w;
  }
  return std::max(largest, total / std::max(1, problem.num_controllers()));
}

std::vector<int32_t> NearestControllers(const BalanceProblem& problem) {
  std::vector<int32_t> nearest(problem.num_switches());
  for (int s = 0; s < problem.num_switches(); ++s) {
    size_t best = 0;
    for (size_t i = 1; !problem.distance.empty() && i < problem.distance[s].size(); ++i) {
      if (problem.distance[s][i] < problem.distance[s][best]) best = i;
    }
    nearest[s] = problem.potential[s][best];
  }
  return nearest;
}

int MaxPotential(const BalanceProblem& problem) {
  size_t f = 0;
  for (const auto& candidates : problem.potential) f = std::max(f, candidates.size());
  return static_cast<int>(f);
}

std::vector<Migration> Diff(const std::vector<int32_t>& current, const std::vector<int32_t>& next) {
  std::vector<Migration> moves;
  for (size_t s = 0; s < current.size(); ++s) {
    if (current[s] != next[s]) moves.push_back({static_cast<int32_t>(s), current[s], next[s]});
  }
  return moves;
}

BalanceProblem ScaledLoads(const BalanceProblem& problem, double factor) {
  BalanceProblem scaled = problem;
  for (double& w : scaled.switch_load) w *= factor;
  for (double& capacity : scaled.controller_capacity) capacity *= factor;
  return scaled;
}

Normalised Normalise(const BalanceProblem& problem) {
  constexpr double kGrid = 0x1p40;
  Normalised normalised;
  const double bound = TrivialLowerBound(problem);
  normalised.unit = bound > 0.0 ? bound : 1.0;
  normalised.problem = problem;
  auto round = [&](double value) {
    return std::nearbyint(value / normalised.unit * kGrid) / kGrid;
  };
  for (double& w : normalised.problem.switch_load) w = round(w);
  for (double& capacity : normalised.problem.controller_capacity) {
    if (std::isfinite(capacity)) capacity = round(capacity);
  }
  normalised.error = 0.5 / kGrid * static_cast<double>(problem.num_switches() + 1);
  return normalised;
}

double LoadTolerance(const BalanceProblem& problem) {
  double largest = 0.0;
  for (double w : problem.switch_load) largest = std::max(largest, w);
  return 1e-9 * largest;
}

}  // namespace titan::balance
