// One replica group's side of fault tolerance: each step, after the group has reduced its
// gradients, they and the loss are averaged over the groups of the step's quorum. The group's
// lead rank keeps the quorum (ReplicaQuorum) and tells its other ranks; every rank averages
// its own piece of the model with the ranks of the other groups that hold the same piece
// (GlooGroup). A round that fails (a group died mid-way, Gloo timed out) is redone from the
// group's own gradients with the survivors, so a step commits only with the groups of its
// quorum, and the same on every rank of every group.
#ifndef TITAN_CORE_FAULT_TOLERANCE_REPLICA_GROUPS_H_
#define TITAN_CORE_FAULT_TOLERANCE_REPLICA_GROUPS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/fault_tolerance/fault_tolerance_settings.h"
#include "core/fault_tolerance/gloo_group.h"
#include "core/fault_tolerance/replica_quorum.h"
#include "titan/communicator.h"
#include "titan/compute.h"

namespace titan {

class ReplicaGroups {
 public:
  // `group` is this launch's ranks (the mesh's world); its rank 0 keeps the quorum, whose
  // heartbeat starts here.
  static absl::StatusOr<std::unique_ptr<ReplicaGroups>> Start(
      const FaultToleranceSettings& settings, Communicator& group);

  // Averages `values` (this rank's gradients, its parameters under LocalSGD or its
  // pseudo-gradients under DiLoCo, on `compute`'s device) and `loss` (the group's) over the quorum
  // of `step`, redoing the round until one commits.
  absl::Status Average(int64_t step, Compute& compute, const TensorView& values, double& loss);
  // The keys, semi_sync_method's among them.
  const FaultToleranceSettings& settings() const { return settings_; }

  // Sends (root 0) or receives bytes among the groups a state transfer joins.
  using Broadcast = std::function<absl::Status(void* data, size_t bytes)>;
  using StateTransfer = std::function<absl::Status(const Broadcast& broadcast)>;

  // True when this group started after the run began: it must Rejoin before its first step.
  bool joining() const { return joining_; }
  // Waits to be admitted, then `receive`s the state after the admitting round's step from the
  // lowest member group, each rank from the rank holding the same piece; returns that step.
  absl::StatusOr<int64_t> Rejoin(const StateTransfer& receive);
  // At a step boundary: where the last committed round admitted groups and this group is its
  // lowest member, `send`s them this group's state. A joiner that fails to take it is only
  // logged: it will be found silent and left out.
  absl::Status ServeJoiners(const StateTransfer& send);

  // The groups the last committed step was averaged over.
  const std::vector<int>& members() const { return members_; }

 private:
  ReplicaGroups(const FaultToleranceSettings& settings, Communicator& group)
      : settings_(settings), group_(group) {}
  // The lead's quorum for this round, told to the group's other ranks.
  absl::StatusOr<Quorum> AgreeOnQuorum(int64_t step);
  // The lead's `values` on every rank of the group.
  absl::Status TellGroup(std::vector<float>& values);
  // Sums `sums_` over `members` through a Gloo context, formed anew when they changed.
  absl::Status SumAcrossGroups(const std::vector<int>& members);
  // Whether the round commits: every rank of every member group succeeded.
  absl::StatusOr<bool> AgreeOnOutcome(const Quorum& quorum, bool succeeded);
  absl::StatusOr<float> BroadcastFromLead(float value);

  FaultToleranceSettings settings_;
  Communicator& group_;
  std::unique_ptr<QuorumStore> store_;     // the quorum's and Gloo's rendezvous, on every rank
  std::unique_ptr<ReplicaQuorum> quorum_;  // on the lead rank only
  int64_t round_ = 0;
  bool joining_ = false;
  // The joiners this group owes its state (it is the lowest member of the round that admitted
  // them), and that round.
  std::vector<int> owed_joiners_;
  int64_t owed_round_ = 0;
  std::vector<int> members_;         // the last quorum
  std::unique_ptr<GlooGroup> gloo_;  // over gloo_members_, reused while they stay
  std::vector<int> gloo_members_;
  std::vector<float> local_, sums_;  // this rank's gradients and loss; their sums over a round
};

}  // namespace titan

#endif  // TITAN_CORE_FAULT_TOLERANCE_REPLICA_GROUPS_H_
