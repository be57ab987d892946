#include "core/fault_tolerance/replica_groups.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "titan/status.h"

namespace titan {
namespace {

// A round that fails with the same quorum as the round before it failed with: no group died, so
// redoing it again would fail again (Gloo cannot connect, say).
constexpr int kMaxFailuresWithoutDeath = 3;

// TITAN_TEST_FT_KILL=<replica_id>:<step>:<before_join|after_join>: the ranks of that group kill
// themselves with SIGKILL at that point of that step, as a crash would, at a place the tests
// choose.
void KillHereForTest(const FaultToleranceSettings& settings, int64_t step,
                     absl::string_view point) {
  const char* value = std::getenv("TITAN_TEST_FT_KILL");
  if (value == nullptr) return;
  std::vector<std::string> parts = absl::StrSplit(value, ':');
  int group = -1;
  int64_t at = -1;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &group) ||
      !absl::SimpleAtoi(parts[1], &at)) {
    spdlog::warn("TITAN_TEST_FT_KILL={}: expected <replica_id>:<step>:<point>; ignored", value);
    return;
  }
  if (group == settings.replica_id && at == step && parts[2] == point) {
    spdlog::warn("[test] group {} kills itself at step {} ({})", group, step, std::string(point));
    spdlog::default_logger()->flush();
    raise(SIGKILL);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicaGroups>> ReplicaGroups::Start(
    const FaultToleranceSettings& settings, Communicator& group) {
  std::unique_ptr<ReplicaGroups> groups(new ReplicaGroups(settings, group));
  for (int g = 0; g < settings.group_size; ++g) groups->members_.push_back(g);
  if (group.rank() == 0) {
    TITAN_ASSIGN_OR_RETURN(groups->quorum_, ReplicaQuorum::Start(settings));
  }
  spdlog::info("[ft] replica group {} of {} ({} rank(s)), quorum and Gloo store in {}",
               settings.replica_id, settings.group_size, group.size(), settings.store_folder);
  return groups;
}

absl::StatusOr<float> ReplicaGroups::BroadcastFromLead(float value) {
  if (group_.size() > 1) TITAN_RETURN_IF_ERROR(group_.Broadcast(FlatF32(&value, 1), 0));
  return value;
}

absl::StatusOr<std::vector<int>> ReplicaGroups::AgreeOnQuorum(int64_t step) {
  // [count, ids...]; a count of -1 tells the other ranks that the lead failed.
  std::vector<float> told(1 + settings_.group_size, -1.0f);
  absl::Status lead_error;
  if (quorum_ != nullptr) {
    absl::StatusOr<std::vector<int>> members = quorum_->Join(round_, step, members_);
    if (members.ok()) {
      told[0] = static_cast<float>(members->size());
      for (size_t i = 0; i < members->size(); ++i) told[1 + i] = static_cast<float>((*members)[i]);
    } else {
      lead_error = members.status();
    }
  }
  if (group_.size() > 1) {
    TITAN_RETURN_IF_ERROR(
        group_.Broadcast(FlatF32(told.data(), static_cast<int64_t>(told.size())), 0));
  }
  TITAN_RETURN_IF_ERROR(lead_error);
  if (told[0] < 0) {
    return absl::UnavailableError(
        absl::StrCat("fault tolerance: the group's lead rank could not join round ", round_));
  }
  std::vector<int> members;
  for (int i = 0; i < static_cast<int>(told[0]); ++i)
    members.push_back(static_cast<int>(told[1 + i]));
  return members;
}

absl::Status ReplicaGroups::SumAcrossGroups(const std::vector<int>& members) {
  if (members.size() == 1) return absl::OkStatus();
  if (gloo_ == nullptr || members != gloo_members_) {
    gloo_.reset();
    const int rank = static_cast<int>(
        std::find(members.begin(), members.end(), settings_.replica_id) - members.begin());
    // Ranks of each group that hold the same piece of the model share a context.
    TITAN_ASSIGN_OR_RETURN(
        gloo_, GlooGroup::Connect(
                   settings_.store_folder, absl::StrCat("round", round_, "/rank", group_.rank()),
                   rank, static_cast<int>(members.size()), settings_.process_group_timeout));
    gloo_members_ = members;
  }
  return gloo_->AllReduceSum(sums_);
}

absl::StatusOr<bool> ReplicaGroups::AgreeOnOutcome(const std::vector<int>& members,
                                                   bool succeeded) {
  float all = succeeded ? 1.0f : 0.0f;
  if (group_.size() > 1) TITAN_RETURN_IF_ERROR(group_.AllReduce(FlatF32(&all, 1), ReduceOp::kMin));
  float commit = 0;
  if (quorum_ != nullptr) {
    TITAN_ASSIGN_OR_RETURN(bool decided, quorum_->Vote(round_, members, all > 0.5f));
    commit = decided ? 1.0f : 0.0f;
  }
  TITAN_ASSIGN_OR_RETURN(commit, BroadcastFromLead(commit));
  return commit > 0.5f;
}

absl::Status ReplicaGroups::Average(int64_t step, Compute& compute, const TensorView& grads,
                                    double& loss) {
  const int64_t count = grads.numel();
  local_.resize(count + 1);
  TITAN_RETURN_IF_ERROR(compute.CopyToHost(grads, local_.data()));
  local_[count] = static_cast<float>(loss);
  int failures_without_death = 0;
  std::vector<int> failed_with;
  while (true) {
    KillHereForTest(settings_, step, "before_join");
    TITAN_ASSIGN_OR_RETURN(std::vector<int> members, AgreeOnQuorum(step));
    KillHereForTest(settings_, step, "after_join");
    if (members != members_) {
      spdlog::warn("[ft] step {}: the quorum is now group(s) [{}] (was [{}])", step,
                   absl::StrJoin(members, ", "), absl::StrJoin(members_, ", "));
    }
    sums_ = local_;
    absl::Status summed = SumAcrossGroups(members);
    if (!summed.ok())
      spdlog::warn("[ft] step {} round {}: {}", step, round_, std::string(summed.message()));
    TITAN_ASSIGN_OR_RETURN(bool commit, AgreeOnOutcome(members, summed.ok()));
    ++round_;
    members_ = members;
    if (commit) break;
    // Redone from this rank's own gradients, in a new Gloo context, with whoever is alive.
    gloo_.reset();
    failures_without_death = members == failed_with ? failures_without_death + 1 : 1;
    failed_with = members;
    if (failures_without_death >= kMaxFailuresWithoutDeath) {
      return absl::UnavailableError(
          absl::StrCat("fault tolerance: step ", step, " failed ", failures_without_death,
                       " times with the same groups [", absl::StrJoin(members, ", "),
                       "] and none of them died; last error here: ",
                       summed.ok() ? "none (another rank or group failed)" : summed.message()));
    }
    spdlog::warn("[ft] step {}: round {} did not commit; redoing it with the groups alive", step,
                 round_ - 1);
  }
  const float groups = static_cast<float>(members_.size());
  for (float& value : sums_) value /= groups;
  TITAN_RETURN_IF_ERROR(compute.CopyFromHost(sums_.data(), grads));
  loss = sums_[count];
  return absl::OkStatus();
}

}  // namespace titan
