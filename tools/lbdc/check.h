// titan-lbdc's checks of what a policy (a plugin) answers: its moves and its assignments, with
// errors naming the switch and the controller by their names in the topology.
#ifndef TITAN_TOOLS_LBDC_CHECK_H_
#define TITAN_TOOLS_LBDC_CHECK_H_

#include <cstdint>
#include <vector>

#include "core/topology/switch_graph.h"
#include "titan/balance.h"
#include "titan/status.h"

namespace titan::lbdc {

// Makes `moves` on `assignment`, in order: each must name a switch of the topology and the
// controller the switch is on at that point. The controllers moved to are checked later, by
// CheckAssignment.
absl::Status ApplyMoves(const std::vector<Migration>& moves, const topology::Topology& topology,
                        std::vector<int32_t>& assignment);

// The migrations of a change: switches whose controller in `after` is not the one in `before`.
// A switch a policy moved twice (there and back, or on through a third controller) counts once,
// or not at all when it ends where it started.
int64_t MigratedSwitches(const std::vector<int32_t>& before, const std::vector<int32_t>& after);

// One controller per switch, each one of the switch's potential controllers P(s). `sites` are
// the controllers' switch indices.
absl::Status CheckAssignment(const BalanceProblem& problem, const std::vector<int32_t>& assignment,
                             const topology::Topology& topology, const std::vector<int32_t>& sites);

}  // namespace titan::lbdc

#endif  // TITAN_TOOLS_LBDC_CHECK_H_
