// The quorum's store in an etcd cluster (fault_tolerance.etcd_endpoints), through etcd's v3 JSON
// API over HTTP (libcurl): Raft replicates every value over the cluster's members, so the quorum
// survives the loss of any minority of them. Put-if-absent is a transaction that puts only where
// the key was never created. Each call tries the endpoints in turn (starting from the last one
// that answered) until one answers, for at most `retry_for`: an etcd member lost, or a leader
// being elected, costs a retry, not the run.
#ifndef TITAN_CORE_FAULT_TOLERANCE_ETCD_STORE_H_
#define TITAN_CORE_FAULT_TOLERANCE_ETCD_STORE_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/fault_tolerance/quorum_store.h"

namespace titan {

// Keys go under `prefix` ("/titan/run-7": new for each run, as a store folder is). An error
// when no endpoint answers within `retry_for`, naming them.
absl::StatusOr<std::unique_ptr<QuorumStore>> EtcdQuorumStore(std::vector<std::string> endpoints,
                                                             std::string prefix,
                                                             std::chrono::milliseconds retry_for);

}  // namespace titan

#endif  // TITAN_CORE_FAULT_TOLERANCE_ETCD_STORE_H_
