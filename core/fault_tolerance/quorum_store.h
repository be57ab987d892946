// Where the replica groups' quorum and the rendezvous of their communicator live: a small
// key-value store every group reaches. Two stores: the files of a shared folder
// (fault_tolerance.store_folder), and an etcd cluster (fault_tolerance.etcd_endpoints), which
// Raft replicates so that losing a minority of its members loses nothing.
//
// Keys are paths ("rounds/4/join-1"). The quorum needs only values that appear whole and a
// put-if-absent, whose first writer wins for every reader: that is how all groups agree.
// Every method may be called from several threads at once.
#ifndef TITAN_CORE_FAULT_TOLERANCE_QUORUM_STORE_H_
#define TITAN_CORE_FAULT_TOLERANCE_QUORUM_STORE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/fault_tolerance/fault_tolerance_settings.h"

namespace titan {

class QuorumStore {
 public:
  virtual ~QuorumStore() = default;
  virtual absl::Status Put(const std::string& key, const std::string& value) = 0;
  // AlreadyExists when `key` holds a value already (which is then left as it is).
  virtual absl::Status PutIfAbsent(const std::string& key, const std::string& value) = 0;
  // nullopt when `key` holds no value.
  virtual absl::StatusOr<std::optional<std::string>> Get(const std::string& key) = 0;
  // The keys directly under `folder` ("requests" lists "requests/3" as "3", and no key of a
  // folder within it).
  virtual absl::StatusOr<std::vector<std::string>> List(const std::string& folder) = 0;
  virtual absl::Status Delete(const std::string& key) = 0;
  // `folder` and every key under it.
  virtual absl::Status DeleteFolder(const std::string& folder) = 0;
  // Where the store is, for messages: "store folder /x" or "etcd at http://...".
  virtual std::string Describe() const = 0;
};

// The store the settings name: etcd_endpoints when given, else store_folder.
absl::StatusOr<std::unique_ptr<QuorumStore>> OpenQuorumStore(
    const FaultToleranceSettings& settings);

// Files of one folder; put-if-absent is link(2), which fails when the file exists.
std::unique_ptr<QuorumStore> FileQuorumStore(const std::string& folder);

}  // namespace titan

#endif  // TITAN_CORE_FAULT_TOLERANCE_QUORUM_STORE_H_
