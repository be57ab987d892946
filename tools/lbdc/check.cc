#include "tools/lbdc/check.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace titan::lbdc {

absl::Status ApplyMoves(const std::vector<Migration>& moves, const topology::Topology& topology,
                        std::vector<int32_t>& assignment) {
  const int n = topology.size();
  for (size_t i = 0; i < moves.size(); ++i) {
    const Migration& move = moves[i];
    if (move.switch_index < 0 || move.switch_index >= n) {
      return absl::InternalError(
          absl::StrCat("move ", i, " names switch ", move.switch_index, "; expected 0..", n - 1));
    }
    const int32_t on = assignment[move.switch_index];
    if (on != move.from) {
      return absl::InternalError(
          absl::StrCat("move ", i, " takes switch '", topology.name[move.switch_index],
                       "' from controller ", move.from, ", but the switch is on controller ", on));
    }
    assignment[move.switch_index] = move.to;
  }
  return absl::OkStatus();
}

int64_t MigratedSwitches(const std::vector<int32_t>& before, const std::vector<int32_t>& after) {
  int64_t moved = 0;
  for (size_t s = 0; s < before.size() && s < after.size(); ++s) moved += before[s] != after[s];
  return moved;
}

absl::Status CheckAssignment(const BalanceProblem& problem, const std::vector<int32_t>& assignment,
                             const topology::Topology& topology,
                             const std::vector<int32_t>& sites) {
  if (static_cast<int>(assignment.size()) != problem.num_switches()) {
    return absl::InternalError(absl::StrCat("the assignment has ", assignment.size(),
                                            " entries; expected one per switch (",
                                            problem.num_switches(), ")"));
  }
  const int m = static_cast<int>(sites.size());
  auto controller = [&](int32_t c) {
    return c >= 0 && c < m ? absl::StrCat(c, " (at '", topology.name[sites[c]], "')")
                           : absl::StrCat(c, " (there are ", m, " controllers)");
  };
  for (int s = 0; s < problem.num_switches(); ++s) {
    const std::vector<int32_t>& candidates = problem.potential[s];
    if (std::find(candidates.begin(), candidates.end(), assignment[s]) != candidates.end()) {
      continue;
    }
    std::vector<std::string> names;
    for (int32_t c : candidates) names.push_back(controller(c));
    return absl::InternalError(absl::StrCat(
        "switch '", topology.name[s], "' is assigned to controller ", controller(assignment[s]),
        ", which is not one of its potential controllers: ", absl::StrJoin(names, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace titan::lbdc
