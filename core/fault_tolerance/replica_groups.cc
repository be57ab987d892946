#include "core/fault_tolerance/replica_groups.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <string>

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

// TITAN_TEST_FT_KILL=<replica_id>:<step>:<before_join|after_join>[,...]: the ranks of that
// group kill themselves with SIGKILL at that point of that step, as a crash would, at a place
// the tests choose.
void KillHereForTest(const FaultToleranceSettings& settings, int64_t step,
                     absl::string_view point) {
  const char* value = std::getenv("TITAN_TEST_FT_KILL");
  if (value == nullptr) return;
  for (absl::string_view spec : absl::StrSplit(value, ',')) {
    std::vector<std::string> parts = absl::StrSplit(spec, ':');
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
}

// Lists as floats for the group's broadcasts: [count, ids...], padded to `capacity` ids.
void AppendGroups(const std::vector<int>& groups, int capacity, std::vector<float>& out) {
  out.push_back(static_cast<float>(groups.size()));
  for (int i = 0; i < capacity; ++i) {
    out.push_back(i < static_cast<int>(groups.size()) ? static_cast<float>(groups[i]) : -1.0f);
  }
}
std::vector<int> ReadGroups(const std::vector<float>& in, size_t at) {
  std::vector<int> groups;
  for (int i = 0; i < static_cast<int>(in[at]); ++i)
    groups.push_back(static_cast<int>(in[at + 1 + i]));
  return groups;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicaGroups>> ReplicaGroups::Start(
    const FaultToleranceSettings& settings, Communicator& group) {
  std::unique_ptr<ReplicaGroups> groups(new ReplicaGroups(settings, group));
  for (int g = 0; g < settings.group_size; ++g) groups->members_.push_back(g);
  TITAN_ASSIGN_OR_RETURN(groups->store_, OpenQuorumStore(settings));
  std::vector<float> joining = {0.0f};
  if (group.rank() == 0) {
    TITAN_ASSIGN_OR_RETURN(groups->quorum_, ReplicaQuorum::Start(settings, *groups->store_));
    joining[0] = groups->quorum_->joining() ? 1.0f : 0.0f;
  }
  TITAN_RETURN_IF_ERROR(groups->TellGroup(joining));
  groups->joining_ = joining[0] > 0.5f;
  spdlog::info("[ft] replica group {} of {} ({} rank(s)){}, quorum and Gloo rendezvous in the {}",
               settings.replica_id, settings.group_size, group.size(),
               groups->joining_ ? ", rejoining a run under way" : "", groups->store_->Describe());
  return groups;
}

absl::Status ReplicaGroups::TellGroup(std::vector<float>& values) {
  if (group_.size() == 1) return absl::OkStatus();
  return group_.Broadcast(FlatF32(values.data(), static_cast<int64_t>(values.size())), 0);
}

absl::StatusOr<float> ReplicaGroups::BroadcastFromLead(float value) {
  std::vector<float> values = {value};
  TITAN_RETURN_IF_ERROR(TellGroup(values));
  return values[0];
}

absl::StatusOr<Quorum> ReplicaGroups::AgreeOnQuorum(int64_t step) {
  // [ok, members, joiners]; ok = 0 tells the other ranks that the lead failed.
  std::vector<float> told;
  absl::Status lead_error;
  if (quorum_ != nullptr) {
    absl::StatusOr<Quorum> quorum = quorum_->Join(round_, step, members_);
    if (!quorum.ok()) lead_error = quorum.status();
    told.push_back(quorum.ok() ? 1.0f : 0.0f);
    AppendGroups(quorum.ok() ? quorum->members : std::vector<int>{}, settings_.group_size, told);
    AppendGroups(quorum.ok() ? quorum->joiners : std::vector<int>{}, settings_.group_size, told);
  } else {
    told.assign(3 + 2 * settings_.group_size, 0.0f);
  }
  TITAN_RETURN_IF_ERROR(TellGroup(told));
  TITAN_RETURN_IF_ERROR(lead_error);
  if (told[0] < 0.5f) {
    return absl::UnavailableError(
        absl::StrCat("fault tolerance: the group's lead rank could not join round ", round_));
  }
  return Quorum{ReadGroups(told, 1), ReadGroups(told, 2 + settings_.group_size)};
}

absl::Status ReplicaGroups::SumAcrossGroups(const std::vector<int>& members) {
  if (members.size() == 1) return absl::OkStatus();
  if (gloo_ == nullptr || members != gloo_members_) {
    gloo_.reset();
    const int rank = static_cast<int>(
        std::find(members.begin(), members.end(), settings_.replica_id) - members.begin());
    // Ranks of each group that hold the same piece of the model share a context.
    TITAN_ASSIGN_OR_RETURN(
        gloo_,
        GlooGroup::Connect(*store_, absl::StrCat("round", round_, "/rank", group_.rank()), rank,
                           static_cast<int>(members.size()), settings_.process_group_timeout));
    gloo_members_ = members;
  }
  return gloo_->AllReduceSum(sums_);
}

absl::StatusOr<bool> ReplicaGroups::AgreeOnOutcome(const Quorum& quorum, bool succeeded) {
  float all = succeeded ? 1.0f : 0.0f;
  if (group_.size() > 1) TITAN_RETURN_IF_ERROR(group_.AllReduce(FlatF32(&all, 1), ReduceOp::kMin));
  float commit = 0;
  if (quorum_ != nullptr) {
    TITAN_ASSIGN_OR_RETURN(bool decided, quorum_->Vote(round_, quorum, all > 0.5f));
    commit = decided ? 1.0f : 0.0f;
  }
  TITAN_ASSIGN_OR_RETURN(commit, BroadcastFromLead(commit));
  return commit > 0.5f;
}

namespace {

// The transfer's context: the lowest member's rank (0) and the joiners' ranks holding the same
// piece of the model, under the admitting round's name.
absl::StatusOr<std::unique_ptr<GlooGroup>> ConnectTransfer(const FaultToleranceSettings& settings,
                                                           QuorumStore& store, int64_t round,
                                                           int local_rank, int rank, int size) {
  return GlooGroup::Connect(store, absl::StrCat("transfer", round, "/rank", local_rank), rank, size,
                            settings.process_group_timeout);
}

}  // namespace

absl::StatusOr<int64_t> ReplicaGroups::Rejoin(const StateTransfer& receive) {
  // [ok, round, step, members, joiners]
  std::vector<float> told;
  absl::Status lead_error;
  if (quorum_ != nullptr) {
    absl::StatusOr<Admission> admission = quorum_->AwaitAdmission();
    if (!admission.ok()) lead_error = admission.status();
    told = {admission.ok() ? 1.0f : 0.0f, admission.ok() ? static_cast<float>(admission->round) : 0,
            admission.ok() ? static_cast<float>(admission->step) : 0};
    AppendGroups(admission.ok() ? admission->quorum.members : std::vector<int>{},
                 settings_.group_size, told);
    AppendGroups(admission.ok() ? admission->quorum.joiners : std::vector<int>{},
                 settings_.group_size, told);
  } else {
    told.assign(5 + 2 * settings_.group_size, 0.0f);
  }
  TITAN_RETURN_IF_ERROR(TellGroup(told));
  TITAN_RETURN_IF_ERROR(lead_error);
  if (told[0] < 0.5f) {
    return absl::UnavailableError("fault tolerance: the group's lead rank was not admitted");
  }
  const int64_t round = static_cast<int64_t>(told[1]), step = static_cast<int64_t>(told[2]);
  const std::vector<int> members = ReadGroups(told, 3);
  const std::vector<int> joiners = ReadGroups(told, 4 + settings_.group_size);
  const int rank =
      1 + static_cast<int>(std::find(joiners.begin(), joiners.end(), settings_.replica_id) -
                           joiners.begin());
  spdlog::info("[ft] admitted in round {}: receiving the state after step {} from group {}", round,
               step, members.front());
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<GlooGroup> transfer,
                         ConnectTransfer(settings_, *store_, round, group_.rank(), rank,
                                         1 + static_cast<int>(joiners.size())));
  TITAN_RETURN_IF_ERROR(receive(
      [&](void* data, size_t bytes) { return transfer->Broadcast(data, bytes, /*root=*/0); }));
  round_ = round + 1;
  members_ = members;
  members_.insert(members_.end(), joiners.begin(), joiners.end());
  std::sort(members_.begin(), members_.end());
  joining_ = false;
  spdlog::info("[ft] rejoined at step {}: the groups are now [{}]", step + 1,
               absl::StrJoin(members_, ", "));
  return step;
}

absl::Status ReplicaGroups::ServeJoiners(const StateTransfer& send) {
  if (owed_joiners_.empty()) return absl::OkStatus();
  const std::vector<int> joiners = std::move(owed_joiners_);
  owed_joiners_.clear();
  absl::StatusOr<std::unique_ptr<GlooGroup>> transfer = ConnectTransfer(
      settings_, *store_, owed_round_, group_.rank(), 0, 1 + static_cast<int>(joiners.size()));
  absl::Status sent = transfer.status();
  if (sent.ok()) {
    sent = send(
        [&](void* data, size_t bytes) { return (*transfer)->Broadcast(data, bytes, /*root=*/0); });
  }
  if (sent.ok()) {
    spdlog::info("[ft] sent this group's state to group(s) [{}]", absl::StrJoin(joiners, ", "));
  } else {
    spdlog::warn("[ft] sending the state to group(s) [{}] failed; they will be left out: {}",
                 absl::StrJoin(joiners, ", "), std::string(sent.message()));
  }
  return absl::OkStatus();
}

absl::Status ReplicaGroups::Average(int64_t step, Compute& compute, const TensorView& values,
                                    double& loss) {
  const int64_t count = values.numel();
  local_.resize(count + 1);
  TITAN_RETURN_IF_ERROR(compute.CopyToHost(values, local_.data()));
  local_[count] = static_cast<float>(loss);
  int failures_without_death = 0;
  size_t averaged_over = 1;
  std::vector<int> failed_with;
  while (true) {
    KillHereForTest(settings_, step, "before_join");
    TITAN_ASSIGN_OR_RETURN(Quorum quorum, AgreeOnQuorum(step));
    KillHereForTest(settings_, step, "after_join");
    const std::vector<int>& members = quorum.members;
    if (members != members_) {
      spdlog::warn("[ft] step {}: the quorum is now group(s) [{}] (was [{}])", step,
                   absl::StrJoin(members, ", "), absl::StrJoin(members_, ", "));
    }
    sums_ = local_;
    absl::Status summed = SumAcrossGroups(members);
    if (!summed.ok()) {
      spdlog::warn("[ft] step {} round {}: {}", step, round_, std::string(summed.message()));
      // Closing this side's connections fails the peers still waiting on them at once, rather
      // than at Gloo's timeout.
      gloo_.reset();
    }
    TITAN_ASSIGN_OR_RETURN(bool commit, AgreeOnOutcome(quorum, summed.ok()));
    const int64_t round = round_++;
    members_ = members;
    if (commit) {
      averaged_over = members.size();
      if (!quorum.joiners.empty()) {
        spdlog::info("[ft] step {}: group(s) [{}] join after it", step,
                     absl::StrJoin(quorum.joiners, ", "));
        if (members.front() == settings_.replica_id) {
          owed_joiners_ = quorum.joiners;
          owed_round_ = round;
        }
        members_.insert(members_.end(), quorum.joiners.begin(), quorum.joiners.end());
        std::sort(members_.begin(), members_.end());
      }
      break;
    }
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
                 round);
  }
  const float groups = static_cast<float>(averaged_over);
  for (float& value : sums_) value /= groups;
  TITAN_RETURN_IF_ERROR(compute.CopyFromHost(sums_.data(), values));
  loss = sums_[count];
  return absl::OkStatus();
}

}  // namespace titan
