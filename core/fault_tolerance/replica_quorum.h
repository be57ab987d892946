// The quorum of replica groups, kept in files of fault_tolerance.store_folder that every group's
// lead rank reads and writes (one folder on a filesystem all groups share): a simple lighthouse.
//
// Each group beats a heartbeat file from a thread of its own, so a group busy with a long step
// is alive and only a dead or hung process goes silent. Training runs in rounds: every step has
// one round, and a step whose round fails is redone in the next. In a round each group joins;
// once every group of the last quorum has joined or gone silent, the first to see it publishes
// the round's quorum, and then each member votes whether its gradients crossed the groups; the
// first to hear every member (or see one go silent) publishes the round's outcome. A decision
// is a file published with link(2), which fails when the file exists, so the first decision is
// the one every group reads: all groups agree on every quorum and every commit.
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

namespace titan {

class ReplicaQuorum {
 public:
  // Creates the store folder's layout if needed and starts this group's heartbeat.
  static absl::StatusOr<std::unique_ptr<ReplicaQuorum>> Start(
      const FaultToleranceSettings& settings);
  ~ReplicaQuorum();  // stops the heartbeat: the others see this group leave

  // Joins `round` at `step` and returns its quorum, ascending: the groups of `expected` (the
  // last quorum; every group at first) that joined, less those that went silent. An error when
  // this group is not in it, when it has fewer than min_replica_size groups, or when its
  // members are at different steps.
  absl::StatusOr<std::vector<int>> Join(int64_t round, int64_t step,
                                        const std::vector<int>& expected);
  // Votes whether this group's part of `round` succeeded; returns whether the round commits:
  // every member of its quorum voted yes.
  absl::StatusOr<bool> Vote(int64_t round, const std::vector<int>& members, bool succeeded);

  // Stops the heartbeat without saying goodbye: as a crashed process would (tests).
  void StopHeartbeatForTest();

 private:
  explicit ReplicaQuorum(const FaultToleranceSettings& settings) : settings_(settings) {}
  std::string RoundFolder(int64_t round) const;
  // Waits until each group of `groups` has written `<prefix><group>` in the round's folder or
  // is silent; returns each writer's content by group.
  absl::StatusOr<std::map<int, std::string>> AwaitFiles(int64_t round, const std::string& prefix,
                                                        const std::vector<int>& groups);
  // Publishes `content` as the round's `name` unless a group already did; returns the
  // published content.
  absl::StatusOr<std::string> Decide(int64_t round, const std::string& name,
                                     const std::string& content);
  // True once `group` has not beaten for heartbeat_timeout (join_timeout when never seen) on
  // this process's clock, so no two machines' clocks are compared.
  bool Silent(int group);
  void Beat();

  struct Seen {
    std::string beat;  // the heartbeat file's last content
    std::chrono::steady_clock::time_point since;
    bool ever = false;
  };
  FaultToleranceSettings settings_;
  std::map<int, Seen> seen_;
  int64_t beats_ = 0;  // written by the heartbeat thread only, once it runs
  std::atomic<bool> beating_{true};
  std::thread heartbeat_;
};

// Writes `content` to `path` through a temporary file, so that a reader sees all or nothing;
// with `exclusive`, fails with AlreadyExists when `path` exists.
absl::Status PublishFile(const std::string& path, const std::string& content, bool exclusive);

}  // namespace titan

#endif  // TITAN_CORE_FAULT_TOLERANCE_REPLICA_QUORUM_H_
