// [fault_tolerance]: a job of several replica groups, each its own launch, whose gradients are
// averaged over the groups alive each step (docs/fault-tolerance.md).
#ifndef TITAN_CORE_FAULT_TOLERANCE_FAULT_TOLERANCE_SETTINGS_H_
#define TITAN_CORE_FAULT_TOLERANCE_FAULT_TOLERANCE_SETTINGS_H_

#include <chrono>
#include <string>
#include <vector>

namespace titan {

struct FaultToleranceSettings {
  bool enable = false;
  int replica_id = 0;        // this launch's group, 0 .. group_size - 1
  int group_size = 1;        // the groups the job starts with
  int min_replica_size = 1;  // fewer groups alive is an error
  // Shared by every group's ranks: the quorum's files and the Gloo rendezvous.
  std::string store_folder;
  // Or an etcd cluster's client URLs (one member per node or group: Raft keeps the quorum while
  // most members live), the run's keys under etcd_prefix.
  std::vector<std::string> etcd_endpoints;
  std::string etcd_prefix;
  std::chrono::milliseconds process_group_timeout{10000};  // Gloo's connect and collectives
  std::chrono::milliseconds heartbeat_timeout{10000};      // a group silent this long is dead
  std::chrono::milliseconds join_timeout{60000};  // a group never heard from is awaited so long
  // semi_sync_method = "local_sgd" or "diloco": each group steps on its own gradients and the
  // groups sync after every `sync_steps`-th step; 0: every step averages the gradients.
  int64_t sync_steps = 0;
  // "local_sgd" syncs by averaging the parameters. "diloco" averages the pseudo-gradients (the
  // synced parameters less the local ones), and an outer SGD with Nesterov momentum steps the
  // synced parameters by them; each group then takes fragment_update_alpha x its local
  // parameters + (1 - fragment_update_alpha) x the synced ones.
  bool diloco = false;
  double outer_lr = 0.7, outer_momentum = 0.9;
  double fragment_update_alpha = 0;
};

}  // namespace titan

#endif  // TITAN_CORE_FAULT_TOLERANCE_FAULT_TOLERANCE_SETTINGS_H_
