// The quorum of replica groups, kept in a store every group's lead rank reads and writes (the
// files of fault_tolerance.store_folder, or an etcd cluster: QuorumStore): the lighthouse.
//
// Each group beats a heartbeat file from a thread of its own, so a group busy with a long step
// is alive and only a dead or hung process goes silent. Training runs in rounds: every step has
// one round, and a step whose round fails is redone in the next. In a round each group joins;
// once every group of the last quorum has joined or gone silent, the first to see it publishes
// the round's quorum, and then each member votes whether its gradients crossed the groups; the
// first to hear every member (or see one go silent) publishes the round's outcome. A decision
// is published with the store's put-if-absent, so the first decision is the one every group
// reads: all groups agree on every quorum and every commit.
//
// A group started after the run began (a restarted one) asks to join; the next quorum names
// it among its joiners, and once that round commits, its lowest member sends the joiners its
// state at the step boundary (ReplicaGroups), and they are members from the next round on.
#ifndef TITAN_CORE_FAULT_TOLERANCE_REPLICA_QUORUM_H_
#define TITAN_CORE_FAULT_TOLERANCE_REPLICA_QUORUM_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "core/fault_tolerance/fault_tolerance_settings.h"
#include "core/fault_tolerance/quorum_store.h"

namespace titan {

// A round's quorum: the groups averaging this step, and the groups admitted after it.
struct Quorum {
  std::vector<int> members;  // ascending
  std::vector<int> joiners;  // ascending; none of them a member
  bool operator==(const Quorum&) const = default;
};

// Where a joining group enters: the round whose quorum admitted it, that round's step (the
// state it receives is the one after it) and quorum.
struct Admission {
  int64_t round = 0;
  int64_t step = 0;
  Quorum quorum;
};

class ReplicaQuorum {
 public:
  // Starts this group's heartbeat in `store`, which must outlive the quorum.
  static absl::StatusOr<std::unique_ptr<ReplicaQuorum>> Start(
      const FaultToleranceSettings& settings, QuorumStore& store);
  ~ReplicaQuorum();  // stops the heartbeat: the others see this group leave

  // True when a round had committed when this group started (it cannot start afresh): it
  // joins by AwaitAdmission.
  bool joining() const { return joining_; }
  // Asks the live groups to admit this group and waits until a committed round admits it (at
  // most join_timeout: an error naming the store folder).
  absl::StatusOr<Admission> AwaitAdmission();

  // Joins `round` at `step` and returns its quorum: as members, the groups of `expected` (the
  // last quorum's; every group at first) that joined, less those that went silent; as joiners,
  // the groups asking to join that are not silent. An error when this group is not a member,
  // when there are fewer than min_replica_size members, or when they are at different steps.
  absl::StatusOr<Quorum> Join(int64_t round, int64_t step, const std::vector<int>& expected);
  // Votes whether this group's part of `round` succeeded; returns whether the round commits:
  // every member of its quorum voted yes. A committed round's joiners are told they are in.
  absl::StatusOr<bool> Vote(int64_t round, const Quorum& quorum, bool succeeded);

  // Stops the heartbeat without saying goodbye: as a crashed process would (tests).
  void StopHeartbeatForTest();

 private:
  ReplicaQuorum(const FaultToleranceSettings& settings, QuorumStore& store);
  std::string RoundFolder(int64_t round) const;
  // `key`'s value; "" when it has none or the store fails.
  std::string Read(const std::string& key);
  // The groups asking to join (their request files), less `members` and the silent.
  std::vector<int> Requesters(const std::vector<int>& members);
  // Waits until each group of `groups` has written `<prefix><group>` in the round's folder, is
  // silent, or has been waited for join_timeout; returns each writer's content by group.
  absl::StatusOr<std::map<int, std::string>> AwaitFiles(int64_t round, const std::string& prefix,
                                                        const std::vector<int>& groups);
  // Publishes `content` as the round's `name` unless a group already did; returns the
  // published content.
  absl::StatusOr<std::string> Decide(int64_t round, const std::string& name,
                                     const std::string& content);
  // True once `group` has not beaten for heartbeat_timeout (join_timeout when never seen) on
  // this process's clock, so no two machines' clocks are compared. As a `member`, also once
  // a process other than the one that joined the last quorum beats for it (it was restarted).
  bool Silent(int group, bool member);
  void Beat();

  struct Seen {
    std::string beat;  // the heartbeat file's last content: "<incarnation>:<count>"
    std::chrono::steady_clock::time_point since;
    bool ever = false;
  };
  // The processes that joined the last quorum, by group: another process beating for one of
  // them means it died (a group starts afresh only until a round commits).
  std::map<int, std::string> incarnations_;
  const std::string incarnation_;  // this process's, unique among every group's processes
  FaultToleranceSettings settings_;
  QuorumStore& store_;
  std::map<int, Seen> seen_;
  int64_t beats_ = 0;
  bool joining_ = false;  // written by the heartbeat thread only, once it runs
  std::atomic<bool> beating_{true};
  std::thread heartbeat_;
};

}  // namespace titan

#endif  // TITAN_CORE_FAULT_TOLERANCE_REPLICA_QUORUM_H_
