// Where the ranks of a job sit in the cluster, as the control plane's LBDC instance: every rank
// is a switch `rank<R>`, its potential controllers are the controller ranks within `hops` of it.
// The topology is a titan-lbdc file (docs/lbdc.md) or, without one, the ranks' hostnames: each
// host a switch under one switch `cluster`, each rank a leaf under its host, so two ranks are
// 2 hops apart on one host and 4 apart on two.
#ifndef TITAN_CORE_RUNTIME_CONTROL_PLANE_RANK_TOPOLOGY_H_
#define TITAN_CORE_RUNTIME_CONTROL_PLANE_RANK_TOPOLOGY_H_

#include <string>
#include <vector>

#include "titan/balance.h"
#include "titan/status.h"

namespace titan {

// Where the controllers go and what they reach (the [control_plane] keys).
struct ControlPlacement {
  std::string topology_file;      // empty: from hostnames
  int controllers = 1;            // a count, one per node first
  std::vector<int> listed_ranks;  // if not empty: these ranks, before the file's and the count
  int hops = 4;
};

struct ControlInstance {
  std::vector<int> controller_rank;  // per controller index
  BalanceProblem problem;            // switch r is rank r; loads left 0
};

// `hostnames` per rank; `placement.topology_file` empty or a .json/.toml titan-lbdc file in which
// rank R is the switch `rank<R>` or, when the file has none, a leaf under the switch named by its
// host. An empty hostname is one not known yet: a rank the file does not name is then Unavailable.
// Controllers: the listed ranks, else the file's `controllers` (rank switches) if it lists any,
// else `controllers` ranks (at most all of them) placed one per node (the switch a rank hangs
// under) first, lowest ranks first.
absl::StatusOr<ControlInstance> BuildControlInstance(const std::vector<std::string>& hostnames,
                                                     const ControlPlacement& placement);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_CONTROL_PLANE_RANK_TOPOLOGY_H_
