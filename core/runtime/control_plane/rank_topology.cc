#include "core/runtime/control_plane/rank_topology.h"

#include <algorithm>
#include <limits>
#include <map>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/topology/switch_graph.h"

namespace titan {
namespace {

int AddSwitch(topology::Topology& topology, std::string name) {
  topology.name.push_back(std::move(name));
  topology.links.emplace_back();
  return topology.size() - 1;
}

void Link(topology::Topology& topology, int a, int b) {
  topology.links[a].push_back(b);
  topology.links[b].push_back(a);
}

// The switch of each rank, adding `rank<R>` leaves under their hosts where the topology lacks
// them (all of them for the hostname topology).
absl::StatusOr<std::vector<int>> PlaceRanks(topology::Topology& topology,
                                            const std::vector<std::string>& hostnames,
                                            const std::string& file) {
  std::map<std::string, int> index;
  for (int s = 0; s < topology.size(); ++s) index.emplace(topology.name[s], s);
  std::vector<int> at(hostnames.size());
  for (size_t r = 0; r < hostnames.size(); ++r) {
    const std::string name = absl::StrCat("rank", r);
    if (auto it = index.find(name); it != index.end()) {
      at[r] = it->second;
      continue;
    }
    if (hostnames[r].empty()) {
      return absl::UnavailableError(absl::StrCat("rank ", r, "'s host is not known yet"));
    }
    auto host = index.find(hostnames[r]);
    if (host == index.end() && file.empty()) {
      host = index.emplace(hostnames[r], AddSwitch(topology, hostnames[r])).first;
      Link(topology, host->second, 0);
    }
    if (host == index.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("control_plane.topology = \"", file, "\": rank ", r, " (host \"",
                       hostnames[r], "\") is in no switch of the file: expected a switch '", name,
                       "' or '", hostnames[r], "'"));
    }
    at[r] = AddSwitch(topology, name);
    Link(topology, at[r], host->second);
  }
  return at;
}

// The listed ranks, else the file's controllers (rank switches), else `count` ranks one per
// node first.
absl::StatusOr<std::vector<int>> ControllerRanks(const topology::Topology& topology,
                                                 const std::vector<int>& at, int count,
                                                 const std::vector<int>& listed,
                                                 const std::string& file) {
  for (size_t i = 0; i < listed.size(); ++i) {
    if (listed[i] < 0 || listed[i] >= static_cast<int>(at.size()) ||
        std::find(listed.begin(), listed.begin() + static_cast<std::ptrdiff_t>(i), listed[i]) !=
            listed.begin() + static_cast<std::ptrdiff_t>(i)) {
      return absl::InvalidArgumentError(
          absl::StrCat("control_plane.controller_ranks: rank ", listed[i],
                       " is not a rank of this job or listed twice: expected distinct ranks 0..",
                       at.size() - 1));
    }
  }
  std::vector<int> ranks = listed;
  if (!ranks.empty()) {
    std::sort(ranks.begin(), ranks.end());
    return ranks;
  }
  for (const std::string& name : topology.controllers_at) {
    int rank = -1;
    absl::string_view digits = name;
    if (!absl::ConsumePrefix(&digits, "rank") || !absl::SimpleAtoi(digits, &rank) || rank < 0 ||
        rank >= static_cast<int>(at.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("control_plane.topology = \"", file, "\": controller '", name,
                       "' is not a rank of this job: expected rank0..rank", at.size() - 1));
    }
    ranks.push_back(rank);
  }
  if (!ranks.empty()) return ranks;
  const int world = static_cast<int>(at.size());
  // A recipe serves jobs of several sizes: more controllers than ranks means every rank.
  count = std::min(count, world);
  // The node of a rank is the switch it hangs under; each pass takes one rank per node.
  std::map<int, std::vector<int>> by_node;
  std::vector<int> nodes;
  for (int r = 0; r < world; ++r) {
    const int node = topology.links[at[r]].empty() ? at[r] : topology.links[at[r]].front();
    if (by_node[node].empty()) nodes.push_back(node);
    by_node[node].push_back(r);
  }
  for (size_t pass = 0; static_cast<int>(ranks.size()) < count; ++pass) {
    for (int node : nodes) {
      if (pass < by_node[node].size() && static_cast<int>(ranks.size()) < count) {
        ranks.push_back(by_node[node][pass]);
      }
    }
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

}  // namespace

absl::StatusOr<ControlInstance> BuildControlInstance(const std::vector<std::string>& hostnames,
                                                     const ControlPlacement& placement) {
  const std::string& topology_file = placement.topology_file;
  const int hops = placement.hops;
  topology::Topology topology;
  if (topology_file.empty()) {
    AddSwitch(topology, "cluster");
  } else {
    std::mt19937_64 unused;
    absl::StatusOr<topology::Topology> read = topology::MakeTopology(topology_file, unused);
    if (!read.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("control_plane.topology: ", read.status().message()));
    }
    topology = std::move(*read);
  }
  TITAN_ASSIGN_OR_RETURN(std::vector<int> at, PlaceRanks(topology, hostnames, topology_file));
  ControlInstance instance;
  TITAN_ASSIGN_OR_RETURN(
      instance.controller_rank,
      ControllerRanks(topology, at, placement.controllers, placement.listed_ranks, topology_file));
  // Every switch gets a stand-in site of its own, so that titan-lbdc's PotentialControllers
  // accepts switches out of every controller's reach; the stand-ins are dropped after, and only
  // a rank is required to have a controller.
  std::vector<int32_t> sites;
  for (int rank : instance.controller_rank) sites.push_back(at[rank]);
  const int placed = static_cast<int>(sites.size());
  for (int s = 0; s < topology.size(); ++s) sites.push_back(s);
  TITAN_ASSIGN_OR_RETURN(BalanceProblem all,
                         topology::PotentialControllers(topology, sites, hops, 0));
  BalanceProblem& problem = instance.problem;
  problem.controller_capacity.assign(placed, std::numeric_limits<double>::infinity());
  for (size_t r = 0; r < at.size(); ++r) {
    problem.switch_load.push_back(0.0);
    problem.potential.emplace_back();
    problem.distance.emplace_back();
    for (size_t i = 0; i < all.potential[at[r]].size(); ++i) {
      if (all.potential[at[r]][i] >= placed) continue;
      problem.potential.back().push_back(all.potential[at[r]][i]);
      problem.distance.back().push_back(all.distance[at[r]][i]);
    }
    if (problem.potential.back().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("control_plane.hops = ", hops, ": rank ", r, " (switch '",
                       topology.name[at[r]], "') has no controller within ", hops,
                       " hops; raise control_plane.hops or add controllers"));
    }
  }
  return instance;
}

}  // namespace titan
