#include "core/fault_tolerance/replica_quorum.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "titan/status.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr auto kBeatEvery = std::chrono::milliseconds(200);

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string HeartbeatPath(const std::string& store, int group) {
  return (fs::path(store) / "heartbeats" / std::to_string(group)).string();
}

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

// TITAN_TEST_FT_ADMIT_AT_STEP=<step>[,<step>...]: those steps' quorums wait until every group
// missing asks to join, so that a test knows where a restarted group is back by.
bool AdmitAtStepForTest(int64_t step) {
  const char* value = std::getenv("TITAN_TEST_FT_ADMIT_AT_STEP");
  if (value == nullptr) return false;
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    int64_t at = -1;
    if (absl::SimpleAtoi(item, &at) && at == step) return true;
  }
  return false;
}

}  // namespace

absl::Status PublishFile(const std::string& path, const std::string& content, bool exclusive) {
  // Unique to this process and call: groups (and tests' threads) may publish the same name.
  static std::atomic<int64_t> calls{0};
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid(), ".", calls++);
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << content;
    out.close();
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", temporary));
  }
  const int result =
      exclusive ? link(temporary.c_str(), path.c_str()) : rename(temporary.c_str(), path.c_str());
  const int error = errno;
  if (exclusive) unlink(temporary.c_str());
  if (result == 0) return absl::OkStatus();
  if (error == EEXIST) return absl::AlreadyExistsError(path);
  return absl::UnavailableError(absl::StrCat("cannot publish ", path, ": ", std::strerror(error)));
}

absl::StatusOr<std::unique_ptr<ReplicaQuorum>> ReplicaQuorum::Start(
    const FaultToleranceSettings& settings) {
  std::error_code error;
  for (const char* folder : {"heartbeats", "rounds", "requests", "admitted"}) {
    fs::create_directories(fs::path(settings.store_folder) / folder, error);
    if (error) {
      return absl::InvalidArgumentError(absl::StrCat("fault_tolerance.store_folder: cannot create ",
                                                     settings.store_folder, "/", folder, ": ",
                                                     error.message()));
    }
  }
  std::unique_ptr<ReplicaQuorum> quorum(new ReplicaQuorum(settings));
  // The first quorum was formed: this group comes back, or comes late.
  quorum->joining_ = fs::exists(quorum->StorePath("started"));
  quorum->Beat();  // the first beat before Start returns, so a fast peer sees this group at once
  quorum->heartbeat_ = std::thread([q = quorum.get()] {
    while (q->beating_) {
      std::this_thread::sleep_for(kBeatEvery);
      q->Beat();
    }
  });
  return quorum;
}

ReplicaQuorum::ReplicaQuorum(const FaultToleranceSettings& settings)
    : incarnation_(absl::StrCat(settings.replica_id, "-", getpid(), "-",
                                std::chrono::system_clock::now().time_since_epoch().count())),
      settings_(settings) {}

ReplicaQuorum::~ReplicaQuorum() { StopHeartbeatForTest(); }

void ReplicaQuorum::StopHeartbeatForTest() {
  beating_ = false;
  if (heartbeat_.joinable()) heartbeat_.join();
}

void ReplicaQuorum::Beat() {
  // A failed write is a missed beat: the peers judge this group by the beats they see.
  (void)PublishFile(HeartbeatPath(settings_.store_folder, settings_.replica_id),
                    absl::StrCat(incarnation_, ":", beats_++), /*exclusive=*/false);
}

bool ReplicaQuorum::Silent(int group, bool member) {
  const std::string beat = ReadWhole(HeartbeatPath(settings_.store_folder, group));
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

std::string ReplicaQuorum::StorePath(const std::string& name) const {
  return (fs::path(settings_.store_folder) / name).string();
}

std::vector<int> ReplicaQuorum::Requesters(const std::vector<int>& members) {
  std::vector<int> requesters;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(StorePath("requests"), error)) {
    int group = -1;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &group)) continue;  // a temporary
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
  const std::string request = absl::StrCat(StorePath("requests"), "/", self);
  const std::string admitted = absl::StrCat(StorePath("admitted"), "/", self);
  TITAN_RETURN_IF_ERROR(PublishFile(request, token, /*exclusive=*/false));
  const auto deadline = Clock::now() + settings_.join_timeout;
  while (true) {
    // An admission of an earlier request of this group's (another process) names another token.
    std::vector<std::string> parts = absl::StrSplit(ReadWhole(admitted), ' ');
    Admission admission;
    if (parts.size() == 2 && parts[1] == token && absl::SimpleAtoi(parts[0], &admission.round)) {
      const std::string folder = RoundFolder(admission.round);
      TITAN_ASSIGN_OR_RETURN(admission.quorum,
                             ParseQuorum(ReadWhole(folder + "/quorum"), folder + "/quorum"));
      const std::string donor_join =
          absl::StrCat(folder, "/join-", admission.quorum.members.front());
      const std::string donor_at = ReadWhole(donor_join);
      if (!absl::SimpleAtoi(donor_at.substr(0, donor_at.find(' ')), &admission.step)) {
        return absl::DataLossError(absl::StrCat("fault tolerance: ", donor_join, " holds no step"));
      }
      fs::remove(request);
      return admission;
    }
    if (Clock::now() > deadline) {
      fs::remove(request);
      return absl::UnavailableError(
          absl::StrCat("fault tolerance: no live replica group admitted group ", self,
                       " within "
                       "fault_tolerance.join_timeout_ms = ",
                       settings_.join_timeout.count(), " (", settings_.store_folder,
                       " shows a run under way: its groups are gone, or the folder is "
                       "another run's; give each run a new store_folder)"));
    }
    std::this_thread::sleep_for(kPoll);
  }
}

std::string ReplicaQuorum::RoundFolder(int64_t round) const {
  return (fs::path(settings_.store_folder) / "rounds" / std::to_string(round)).string();
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
      const std::string path = absl::StrCat(RoundFolder(round), "/", prefix, group);
      if (fs::exists(path)) {
        written[group] = ReadWhole(path);
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
  const std::string path = absl::StrCat(RoundFolder(round), "/", name);
  absl::Status published = PublishFile(path, content, /*exclusive=*/true);
  if (published.ok()) return content;
  if (!absl::IsAlreadyExists(published)) return published;
  return ReadWhole(path);
}

absl::StatusOr<Quorum> ReplicaQuorum::Join(int64_t round, int64_t step,
                                           const std::vector<int>& expected) {
  const std::string folder = RoundFolder(round);
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("fault tolerance: cannot create ", folder, ": ", error.message()));
  }
  const int self = settings_.replica_id;
  TITAN_RETURN_IF_ERROR(PublishFile(absl::StrCat(folder, "/join-", self),
                                    absl::StrCat(step, " ", incarnation_),
                                    /*exclusive=*/false));
  TITAN_ASSIGN_OR_RETURN(auto joined, AwaitFiles(round, "join-", expected));
  Quorum proposal;
  for (const auto& [group, unused] : joined) proposal.members.push_back(group);
  if (AdmitAtStepForTest(step)) {
    const auto deadline = Clock::now() + settings_.join_timeout;
    while (proposal.members.size() + Requesters(proposal.members).size() <
               static_cast<size_t>(settings_.group_size) &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(kPoll);
    }
  }
  proposal.joiners = Requesters(proposal.members);
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
    const std::pair<std::string, std::string> at = absl::StrSplit(ReadWhole(join), ' ');
    incarnations_[member] = at.second;  // the process that is the member from now on
    if (at.first != std::to_string(step)) {
      return absl::InternalError(absl::StrCat("fault tolerance: group ", member, " joined round ",
                                              round, " at step \"", at.first, "\" (", join,
                                              "), this group at step ", step));
    }
  }
  // The lowest member clears the rounds no group reads any more (a joiner reads the round that
  // admitted it while the next one runs).
  if (members.front() == self && round >= 3) fs::remove_all(RoundFolder(round - 3), error);
  return quorum;
}

absl::StatusOr<bool> ReplicaQuorum::Vote(int64_t round, const Quorum& quorum, bool succeeded) {
  const std::string folder = RoundFolder(round);
  TITAN_RETURN_IF_ERROR(PublishFile(absl::StrCat(folder, "/vote-", settings_.replica_id),
                                    succeeded ? "yes" : "no", /*exclusive=*/false));
  TITAN_ASSIGN_OR_RETURN(auto votes, AwaitFiles(round, "vote-", quorum.members));
  bool commit = votes.size() == quorum.members.size();
  for (const auto& [group, vote] : votes) commit = commit && vote == "yes";
  TITAN_ASSIGN_OR_RETURN(std::string outcome, Decide(round, "outcome", commit ? "commit" : "redo"));
  if (outcome != "commit") return false;
  // From the first commit on, a group starting afresh would not hold the run's state.
  TITAN_RETURN_IF_ERROR(PublishFile(StorePath("started"), "", /*exclusive=*/false));
  for (int joiner : quorum.joiners) {
    incarnations_.erase(joiner);  // whichever process of it joins the next round is the member
    // Each member tells them, so that one dying after the vote does not leave them waiting.
    const std::string request = ReadWhole(absl::StrCat(StorePath("requests"), "/", joiner));
    if (request.empty()) continue;  // already admitted, or gone
    TITAN_RETURN_IF_ERROR(PublishFile(absl::StrCat(StorePath("admitted"), "/", joiner),
                                      absl::StrCat(round, " ", request), /*exclusive=*/false));
  }
  return true;
}

}  // namespace titan
