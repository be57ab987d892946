// Switch graphs, shared by the control plane and titan-lbdc: generated fat-trees, leaf-spine
// fabrics and Waxman graphs, or read from a JSON or TOML file; controller placement; and each
// switch's potential controllers (those within a hop limit).
#ifndef TITAN_CORE_TOPOLOGY_SWITCH_GRAPH_H_
#define TITAN_CORE_TOPOLOGY_SWITCH_GRAPH_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "titan/balance.h"
#include "titan/status.h"

namespace titan::topology {

struct Topology {
  std::vector<std::string> name;            // per switch
  std::vector<std::vector<int32_t>> links;  // adjacency lists
  std::vector<std::string> controllers_at;  // switch names, when the file places controllers
  int size() const { return static_cast<int>(name.size()); }
};

// "fat-tree:K" (K even: 5K^2/4 switches), "leaf-spine:LEAVES,SPINES",
// "waxman:N[,ALPHA,BETA,DEGREE]" (N switches in the unit square; see docs/lbdc.md) or a file
// path ending in .json or .toml.
absl::StatusOr<Topology> MakeTopology(const std::string& spec, std::mt19937_64& random);

// Controller sites (switch indices): "random", "k-center" (farthest-first in hops) or "given"
// (the file's controllers, or `names`).
absl::StatusOr<std::vector<int32_t>> PlaceControllers(const Topology& topology,
                                                      const std::string& placement, int count,
                                                      const std::vector<std::string>& names,
                                                      std::mt19937_64& random);

// P(s): the controllers within `hops` of each switch, nearest first, at most `max_potential`
// of them (0: all); distances in hops. Loads are left empty and capacities unbounded.
absl::StatusOr<BalanceProblem> PotentialControllers(const Topology& topology,
                                                    const std::vector<int32_t>& sites, int hops,
                                                    int max_potential);

}  // namespace titan::topology

#endif  // TITAN_CORE_TOPOLOGY_SWITCH_GRAPH_H_
