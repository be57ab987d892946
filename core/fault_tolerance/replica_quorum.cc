#include "core/fault_tolerance/replica_quorum.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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
  for (const char* folder : {"heartbeats", "rounds"}) {
    fs::create_directories(fs::path(settings.store_folder) / folder, error);
    if (error) {
      return absl::InvalidArgumentError(absl::StrCat("fault_tolerance.store_folder: cannot create ",
                                                     settings.store_folder, "/", folder, ": ",
                                                     error.message()));
    }
  }
  // A quorum of round 0 without this group is another run's (or this run's, formed while this
  // group was too slow to start): either way this group cannot take part.
  const std::string first = (fs::path(settings.store_folder) / "rounds" / "0" / "quorum").string();
  if (fs::exists(first)) {
    TITAN_ASSIGN_OR_RETURN(std::vector<int> members, ParseGroups(ReadWhole(first), first));
    if (std::find(members.begin(), members.end(), settings.replica_id) == members.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "fault_tolerance.store_folder ", settings.store_folder,
          " holds a first quorum without group ", settings.replica_id, " (", first,
          "): another run's, or formed while this group was starting; give each run a new "
          "store_folder"));
    }
  }
  std::unique_ptr<ReplicaQuorum> quorum(new ReplicaQuorum(settings));
  quorum->Beat();  // the first beat before Start returns, so a fast peer sees this group at once
  quorum->heartbeat_ = std::thread([q = quorum.get()] {
    while (q->beating_) {
      std::this_thread::sleep_for(kBeatEvery);
      q->Beat();
    }
  });
  return quorum;
}

ReplicaQuorum::~ReplicaQuorum() { StopHeartbeatForTest(); }

void ReplicaQuorum::StopHeartbeatForTest() {
  beating_ = false;
  if (heartbeat_.joinable()) heartbeat_.join();
}

void ReplicaQuorum::Beat() {
  // A failed write is a missed beat: the peers judge this group by the beats they see.
  (void)PublishFile(HeartbeatPath(settings_.store_folder, settings_.replica_id),
                    absl::StrCat(getpid(), ":", beats_++), /*exclusive=*/false);
}

bool ReplicaQuorum::Silent(int group) {
  const std::string beat = ReadWhole(HeartbeatPath(settings_.store_folder, group));
  const auto now = Clock::now();
  auto [it, first_look] = seen_.try_emplace(group);
  Seen& seen = it->second;
  if (first_look || beat != seen.beat) {
    seen.beat = beat;
    seen.since = now;
    seen.ever = seen.ever || !beat.empty();
    return false;
  }
  return now - seen.since > (seen.ever ? settings_.heartbeat_timeout : settings_.join_timeout);
}

std::string ReplicaQuorum::RoundFolder(int64_t round) const {
  return (fs::path(settings_.store_folder) / "rounds" / std::to_string(round)).string();
}

absl::StatusOr<std::map<int, std::string>> ReplicaQuorum::AwaitFiles(
    int64_t round, const std::string& prefix, const std::vector<int>& groups) {
  std::map<int, std::string> written;
  std::vector<int> pending = groups;
  while (!pending.empty()) {
    std::vector<int> still;
    for (int group : pending) {
      const std::string path = absl::StrCat(RoundFolder(round), "/", prefix, group);
      if (fs::exists(path)) {
        written[group] = ReadWhole(path);
      } else if (!Silent(group)) {
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

absl::StatusOr<std::vector<int>> ReplicaQuorum::Join(int64_t round, int64_t step,
                                                     const std::vector<int>& expected) {
  const std::string folder = RoundFolder(round);
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("fault tolerance: cannot create ", folder, ": ", error.message()));
  }
  const int self = settings_.replica_id;
  TITAN_RETURN_IF_ERROR(PublishFile(absl::StrCat(folder, "/join-", self), std::to_string(step),
                                    /*exclusive=*/false));
  TITAN_ASSIGN_OR_RETURN(auto joined, AwaitFiles(round, "join-", expected));
  std::vector<int> proposal;
  for (const auto& [group, unused] : joined) proposal.push_back(group);
  TITAN_ASSIGN_OR_RETURN(std::string decided,
                         Decide(round, "quorum", absl::StrJoin(proposal, ",")));
  TITAN_ASSIGN_OR_RETURN(std::vector<int> members,
                         ParseGroups(decided, absl::StrCat(folder, "/quorum")));
  if (std::find(members.begin(), members.end(), self) == members.end()) {
    return absl::UnavailableError(absl::StrCat(
        "fault tolerance: group ", self, " was left out of the quorum of round ", round, " (step ",
        step, "): the others found it silent for fault_tolerance.heartbeat_timeout_ms ", "= ",
        settings_.heartbeat_timeout.count(), "; it stops (a group rejoins by restarting)"));
  }
  if (static_cast<int>(members.size()) < settings_.min_replica_size) {
    return absl::UnavailableError(absl::StrCat(
        "fault tolerance: round ", round, " (step ", step, ") has a quorum of ", members.size(),
        " group(s) [", decided,
        "], fewer than fault_tolerance.min_replica_size = ", settings_.min_replica_size));
  }
  for (int member : members) {
    const std::string path = absl::StrCat(folder, "/join-", member);
    const std::string at = ReadWhole(path);
    if (at != std::to_string(step)) {
      return absl::InternalError(absl::StrCat("fault tolerance: group ", member, " joined round ",
                                              round, " at step \"", at, "\" (", path,
                                              "), this group at step ", step));
    }
  }
  // The lowest member clears the rounds no group reads any more.
  if (members.front() == self && round >= 3) fs::remove_all(RoundFolder(round - 3), error);
  return members;
}

absl::StatusOr<bool> ReplicaQuorum::Vote(int64_t round, const std::vector<int>& members,
                                         bool succeeded) {
  const std::string folder = RoundFolder(round);
  TITAN_RETURN_IF_ERROR(PublishFile(absl::StrCat(folder, "/vote-", settings_.replica_id),
                                    succeeded ? "yes" : "no", /*exclusive=*/false));
  TITAN_ASSIGN_OR_RETURN(auto votes, AwaitFiles(round, "vote-", members));
  bool commit = votes.size() == members.size();
  for (const auto& [group, vote] : votes) commit = commit && vote == "yes";
  TITAN_ASSIGN_OR_RETURN(std::string outcome, Decide(round, "outcome", commit ? "commit" : "redo"));
  return outcome == "commit";
}

}  // namespace titan
