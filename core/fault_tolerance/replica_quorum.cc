#include "core/fault_tolerance/replica_quorum.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "titan/status.h"

namespace titan {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr auto kBeatEvery = std::chrono::milliseconds(200);

std::string HeartbeatKey(int group) { return absl::StrCat("heartbeats/", group); }

absl::StatusOr<std::vector<int>> ParseGroups(const std::string& text, const std::string& path) {
  std::vector<int> groups;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int group = 0;
    if (!absl::SimpleAtoi(item, &group)) {
      return absl::DataLossError(absl::StrCat(path, ": expected group ids, found \"", text, "\""));
    }
    groups.push_back(group);
  }
  return groups;
}

// "members|joiners", each a comma-separated list.
absl::StatusOr<Quorum> ParseQuorum(const std::string& text, const std::string& path) {
  std::pair<std::string, std::string> parts = absl::StrSplit(text, '|');
  Quorum quorum;
  TITAN_ASSIGN_OR_RETURN(quorum.members, ParseGroups(parts.first, path));
  TITAN_ASSIGN_OR_RETURN(quorum.joiners, ParseGroups(parts.second, path));
  if (quorum.members.empty()) {
    return absl::DataLossError(absl::StrCat(path, ": a quorum without members: \"", text, "\""));
  }
  return quorum;
}

// TITAN_TEST_FT_ADMIT_AT_STEP=<step>[,<step>...]: joiners are admitted at those steps only, and
// those steps' quorums wait until every group missing asks to join, so that a test knows where a
// restarted group is back by, however fast it restarts.
enum class TestAdmission { kAny, kHere, kNotHere };
TestAdmission AdmissionForTest(int64_t step) {
  const char* value = std::getenv("TITAN_TEST_FT_ADMIT_AT_STEP");
  if (value == nullptr) return TestAdmission::kAny;
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    int64_t at = -1;
    if (absl::SimpleAtoi(item, &at) && at == step) return TestAdmission::kHere;
  }
  return TestAdmission::kNotHere;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicaQuorum>> ReplicaQuorum::Start(
    const FaultToleranceSettings& settings, QuorumStore& store) {
  std::unique_ptr<ReplicaQuorum> quorum(new ReplicaQuorum(settings, store));
  // The first quorum was formed: this group comes back, or comes late.
  TITAN_ASSIGN_OR_RETURN(std::optional<std::string> started, store.Get("started"));
  quorum->joining_ = started.has_value();
  quorum->Beat();  // the first beat before Start returns, so a fast peer sees this group at once
  quorum->heartbeat_ = std::thread([q = quorum.get()] {
    while (q->beating_) {
      std::this_thread::sleep_for(kBeatEvery);
      q->Beat();
    }
  });
  return quorum;
}

ReplicaQuorum::ReplicaQuorum(const FaultToleranceSettings& settings, QuorumStore& store)
    : incarnation_(absl::StrCat(settings.replica_id, "-", getpid(), "-",
                                std::chrono::system_clock::now().time_since_epoch().count())),
      settings_(settings),
      store_(store) {}

ReplicaQuorum::~ReplicaQuorum() { StopHeartbeatForTest(); }

void ReplicaQuorum::StopHeartbeatForTest() {
  beating_ = false;
  if (heartbeat_.joinable()) heartbeat_.join();
}

void ReplicaQuorum::Beat() {
  // A failed write is a missed beat: the peers judge this group by the beats they see.
  (void)store_.Put(HeartbeatKey(settings_.replica_id), absl::StrCat(incarnation_, ":", beats_++));
}

bool ReplicaQuorum::Silent(int group, bool member) {
  absl::StatusOr<std::optional<std::string>> read = store_.Get(HeartbeatKey(group));
  if (!read.ok()) return false;  // the store's own error stops the round, not this group's
  const std::string beat = read->value_or("");
  const std::string incarnation = beat.substr(0, beat.find(':'));
  const auto now = Clock::now();
  auto [it, first_look] = seen_.try_emplace(group);
  Seen& seen = it->second;
  if (member && !beat.empty()) {
    // Another process beats for a member of the last quorum: the member is gone.
    auto bound = incarnations_.find(group);
    if (bound != incarnations_.end() && bound->second != incarnation) return true;
  }
  if (first_look || beat != seen.beat) {
    seen.beat = beat;
    seen.since = now;
    seen.ever = seen.ever || !beat.empty();
    return false;
  }
  return now - seen.since > (seen.ever ? settings_.heartbeat_timeout : settings_.join_timeout);
}

std::string ReplicaQuorum::Read(const std::string& key) {
  absl::StatusOr<std::optional<std::string>> value = store_.Get(key);
  return value.ok() ? value->value_or("") : "";
}

std::vector<int> ReplicaQuorum::Requesters(const std::vector<int>& members) {
  std::vector<int> requesters;
  absl::StatusOr<std::vector<std::string>> names = store_.List("requests");
  for (const std::string& name : names.ok() ? *names : std::vector<std::string>{}) {
    int group = -1;
    if (!absl::SimpleAtoi(name, &group)) continue;
    if (std::find(members.begin(), members.end(), group) != members.end()) continue;
    if (group >= 0 && group < settings_.group_size && !Silent(group, /*member=*/false)) {
      requesters.push_back(group);
    }
  }
  std::sort(requesters.begin(), requesters.end());
  return requesters;
}

absl::StatusOr<Admission> ReplicaQuorum::AwaitAdmission() {
  const int self = settings_.replica_id;
  const std::string& token = incarnation_;
  const std::string request = absl::StrCat("requests/", self);
  const std::string admitted = absl::StrCat("admitted/", self);
  TITAN_RETURN_IF_ERROR(store_.Put(request, token));
  const auto deadline = Clock::now() + settings_.join_timeout;
  while (true) {
    // An admission of an earlier request of this group's (another process) names another token.
    std::vector<std::string> parts = absl::StrSplit(Read(admitted), ' ');
    Admission admission;
    if (parts.size() == 2 && parts[1] == token && absl::SimpleAtoi(parts[0], &admission.round)) {
      const std::string folder = RoundFolder(admission.round);
      TITAN_ASSIGN_OR_RETURN(admission.quorum,
                             ParseQuorum(Read(folder + "/quorum"), folder + "/quorum"));
      const std::string donor_join =
          absl::StrCat(folder, "/join-", admission.quorum.members.front());
      const std::string donor_at = Read(donor_join);
      if (!absl::SimpleAtoi(donor_at.substr(0, donor_at.find(' ')), &admission.step)) {
        return absl::DataLossError(absl::StrCat("fault tolerance: ", donor_join, " holds no step"));
      }
      (void)store_.Delete(request);
      return admission;
    }
    if (Clock::now() > deadline) {
      (void)store_.Delete(request);
      return absl::UnavailableError(
          absl::StrCat("fault tolerance: no live replica group admitted group ", self,
                       " within "
                       "fault_tolerance.join_timeout_ms = ",
                       settings_.join_timeout.count(), " (the ", store_.Describe(),
                       " shows a run under way: its groups are gone, or it is another run's; "
                       "give each run a new store_folder or etcd_prefix)"));
    }
    std::this_thread::sleep_for(kPoll);
  }
}

std::string ReplicaQuorum::RoundFolder(int64_t round) const {
  return absl::StrCat("rounds/", round);
}

absl::StatusOr<std::map<int, std::string>> ReplicaQuorum::AwaitFiles(
    int64_t round, const std::string& prefix, const std::vector<int>& groups) {
  std::map<int, std::string> written;
  std::vector<int> pending = groups;
  // A group that beats but never comes (hung) is waited for no longer than this.
  const auto deadline = Clock::now() + settings_.join_timeout;
  while (!pending.empty()) {
    std::vector<int> still;
    const bool late = Clock::now() > deadline;
    for (int group : pending) {
      absl::StatusOr<std::optional<std::string>> value =
          store_.Get(absl::StrCat(RoundFolder(round), "/", prefix, group));
      if (value.ok() && value->has_value()) {
        written[group] = **value;
      } else if (!Silent(group, /*member=*/true) && !late) {
        still.push_back(group);
      }
    }
    pending = std::move(still);
    if (!pending.empty()) std::this_thread::sleep_for(kPoll);
  }
  return written;
}

absl::StatusOr<std::string> ReplicaQuorum::Decide(int64_t round, const std::string& name,
                                                  const std::string& content) {
  const std::string key = absl::StrCat(RoundFolder(round), "/", name);
  absl::Status published = store_.PutIfAbsent(key, content);
  if (published.ok()) return content;
  if (!absl::IsAlreadyExists(published)) return published;
  TITAN_ASSIGN_OR_RETURN(std::optional<std::string> decided, store_.Get(key));
  if (!decided.has_value()) {
    return absl::DataLossError(absl::StrCat("fault tolerance: ", key, " in the ", store_.Describe(),
                                            " was published and is gone"));
  }
  return *decided;
}

absl::StatusOr<Quorum> ReplicaQuorum::Join(int64_t round, int64_t step,
                                           const std::vector<int>& expected) {
  const std::string folder = RoundFolder(round);
  const int self = settings_.replica_id;
  TITAN_RETURN_IF_ERROR(
      store_.Put(absl::StrCat(folder, "/join-", self), absl::StrCat(step, " ", incarnation_)));
  TITAN_ASSIGN_OR_RETURN(auto joined, AwaitFiles(round, "join-", expected));
  Quorum proposal;
  for (const auto& [group, unused] : joined) proposal.members.push_back(group);
  const TestAdmission admission = AdmissionForTest(step);
  if (admission == TestAdmission::kHere) {
    const auto deadline = Clock::now() + settings_.join_timeout;
    while (proposal.members.size() + Requesters(proposal.members).size() <
               static_cast<size_t>(settings_.group_size) &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(kPoll);
    }
  }
  if (admission != TestAdmission::kNotHere) proposal.joiners = Requesters(proposal.members);
  const std::string path = absl::StrCat(folder, "/quorum");
  TITAN_ASSIGN_OR_RETURN(std::string decided,
                         Decide(round, "quorum",
                                absl::StrCat(absl::StrJoin(proposal.members, ","), "|",
                                             absl::StrJoin(proposal.joiners, ","))));
  TITAN_ASSIGN_OR_RETURN(Quorum quorum, ParseQuorum(decided, path));
  const std::vector<int>& members = quorum.members;
  if (std::find(members.begin(), members.end(), self) == members.end()) {
    return absl::UnavailableError(absl::StrCat(
        "fault tolerance: group ", self, " was left out of the quorum of round ", round, " (step ",
        step, "): the others found it silent for fault_tolerance.heartbeat_timeout_ms ", "= ",
        settings_.heartbeat_timeout.count(), "; it stops (restarted, it rejoins)"));
  }
  if (static_cast<int>(members.size()) < settings_.min_replica_size) {
    return absl::UnavailableError(absl::StrCat(
        "fault tolerance: round ", round, " (step ", step, ") has a quorum of ", members.size(),
        " group(s) [", absl::StrJoin(members, ", "),
        "], fewer than fault_tolerance.min_replica_size = ", settings_.min_replica_size));
  }
  for (int member : members) {
    const std::string join = absl::StrCat(folder, "/join-", member);
    const std::pair<std::string, std::string> at = absl::StrSplit(Read(join), ' ');
    incarnations_[member] = at.second;  // the process that is the member from now on
    if (at.first != std::to_string(step)) {
      return absl::InternalError(absl::StrCat("fault tolerance: group ", member, " joined round ",
                                              round, " at step \"", at.first, "\" (", join,
                                              "), this group at step ", step));
    }
  }
  // The lowest member clears the rounds no group reads any more (a joiner reads the round that
  // admitted it while the next one runs).
  if (members.front() == self && round >= 3) (void)store_.DeleteFolder(RoundFolder(round - 3));
  return quorum;
}

absl::StatusOr<bool> ReplicaQuorum::Vote(int64_t round, const Quorum& quorum, bool succeeded) {
  const std::string folder = RoundFolder(round);
  TITAN_RETURN_IF_ERROR(
      store_.Put(absl::StrCat(folder, "/vote-", settings_.replica_id), succeeded ? "yes" : "no"));
  TITAN_ASSIGN_OR_RETURN(auto votes, AwaitFiles(round, "vote-", quorum.members));
  bool commit = votes.size() == quorum.members.size();
  for (const auto& [group, vote] : votes) commit = commit && vote == "yes";
  TITAN_ASSIGN_OR_RETURN(std::string outcome, Decide(round, "outcome", commit ? "commit" : "redo"));
  if (outcome != "commit") return false;
  // From the first commit on, a group starting afresh would not hold the run's state.
  TITAN_RETURN_IF_ERROR(store_.Put("started", ""));
  for (int joiner : quorum.joiners) {
    incarnations_.erase(joiner);  // whichever process of it joins the next round is the member
    // Each member tells them, so that one dying after the vote does not leave them waiting.
    const std::string request = Read(absl::StrCat("requests/", joiner));
    if (request.empty()) continue;  // already admitted, or gone
    TITAN_RETURN_IF_ERROR(
        store_.Put(absl::StrCat("admitted/", joiner), absl::StrCat(round, " ", request)));
  }
  return true;
}

}  // namespace titan
