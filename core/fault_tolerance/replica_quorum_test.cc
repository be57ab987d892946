#include "core/fault_tolerance/replica_quorum.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>

namespace titan {
namespace {

FaultToleranceSettings Settings(const std::string& store, int id, int groups) {
  FaultToleranceSettings settings;
  settings.enable = true;
  settings.replica_id = id;
  settings.group_size = groups;
  settings.store_folder = store;
  // Generous: a live group's heartbeat thread must never look silent on a loaded machine; the
  // silent one below stops beating for good.
  settings.heartbeat_timeout = std::chrono::milliseconds(3000);
  settings.join_timeout = std::chrono::milliseconds(3000);
  return settings;
}

// A file store of `folder`, kept for the test process's life (a quorum holds on to its store).
QuorumStore& Files(const std::string& folder) {
  static std::vector<std::unique_ptr<QuorumStore>> stores;
  stores.push_back(FileQuorumStore(folder));
  return *stores.back();
}

std::string FreshStore(const std::string& name) {
  const std::string path = (std::filesystem::path(testing::TempDir()) / name).string();
  std::filesystem::remove_all(path);
  return path;
}

TEST(ReplicaQuorumTest, EveryGroupAgreesOnTheQuorumAndTheOutcome) {
  const std::string store = FreshStore("quorum_all");
  std::vector<std::unique_ptr<ReplicaQuorum>> groups;
  for (int id = 0; id < 3; ++id)
    groups.push_back(*ReplicaQuorum::Start(Settings(store, id, 3), Files(store)));
  std::vector<std::future<std::pair<Quorum, bool>>> rounds;
  for (int id = 0; id < 3; ++id) {
    rounds.push_back(std::async(std::launch::async, [&, id] {
      Quorum quorum = *groups[id]->Join(0, 1, {0, 1, 2});
      // Group 2's part failed: no group commits.
      return std::make_pair(quorum, *groups[id]->Vote(0, quorum, id != 2));
    }));
  }
  for (auto& round : rounds) {
    auto [quorum, commit] = round.get();
    EXPECT_EQ(quorum, (Quorum{{0, 1, 2}, {}}));
    EXPECT_FALSE(commit);
  }
}

TEST(ReplicaQuorumTest, ASilentGroupIsLeftOutAndTheOthersCommit) {
  const std::string store = FreshStore("quorum_silent");
  std::vector<std::unique_ptr<ReplicaQuorum>> groups;
  for (int id = 0; id < 3; ++id)
    groups.push_back(*ReplicaQuorum::Start(Settings(store, id, 3), Files(store)));
  groups[1]->StopHeartbeatForTest();  // group 1 dies before joining
  std::vector<std::future<std::pair<Quorum, bool>>> rounds;
  for (int id : {0, 2}) {
    rounds.push_back(std::async(std::launch::async, [&, id] {
      Quorum quorum = *groups[id]->Join(0, 1, {0, 1, 2});
      return std::make_pair(quorum, *groups[id]->Vote(0, quorum, true));
    }));
  }
  for (auto& round : rounds) {
    auto [quorum, commit] = round.get();
    EXPECT_EQ(quorum, (Quorum{{0, 2}, {}}));
    EXPECT_TRUE(commit);
  }
}

TEST(ReplicaQuorumTest, FewerGroupsThanMinReplicaSizeIsAnErrorNamingTheKey) {
  const std::string store = FreshStore("quorum_min");
  FaultToleranceSettings settings = Settings(store, 0, 2);
  settings.min_replica_size = 2;
  std::unique_ptr<ReplicaQuorum> alone = *ReplicaQuorum::Start(settings, Files(store));
  absl::StatusOr<Quorum> members = alone->Join(0, 1, {0, 1});  // group 1 never starts
  ASSERT_FALSE(members.ok());
  EXPECT_NE(members.status().message().find("fault_tolerance.min_replica_size = 2"),
            std::string::npos)
      << members.status();
}

TEST(ReplicaQuorumTest, AGroupStartedLateIsAdmittedAfterACommittedRound) {
  const std::string store = FreshStore("quorum_join");
  std::vector<std::unique_ptr<ReplicaQuorum>> groups;
  for (int id = 0; id < 2; ++id)
    groups.push_back(*ReplicaQuorum::Start(Settings(store, id, 3), Files(store)));
  groups[0]->StopHeartbeatForTest();  // only 1 lives on; group 2 has not started
  ASSERT_EQ(*groups[1]->Join(0, 1, {0, 1, 2}), (Quorum{{1}, {}}));
  ASSERT_TRUE(*groups[1]->Vote(0, Quorum{{1}, {}}, true));
  std::unique_ptr<ReplicaQuorum> late = *ReplicaQuorum::Start(Settings(store, 2, 3), Files(store));
  EXPECT_TRUE(late->joining());
  auto admission = std::async(std::launch::async, [&] { return late->AwaitAdmission(); });
  // Round 1 (step 2) names the late group once it asks; a round that does not commit admits no
  // one, so it is asked until one does.
  Quorum quorum;
  for (int64_t round = 1; quorum.joiners.empty(); ++round) {
    quorum = *groups[1]->Join(round, 2, {1});
    if (*groups[1]->Vote(round, quorum, true) && !quorum.joiners.empty()) {
      EXPECT_EQ(quorum, (Quorum{{1}, {2}}));
      Admission admitted = *admission.get();
      EXPECT_EQ(admitted.round, round);
      EXPECT_EQ(admitted.step, 2);
      EXPECT_EQ(admitted.quorum, quorum);
    }
  }
}

TEST(ReplicaQuorumTest, AJoinerNoLiveGroupAdmitsFailsNamingTheStore) {
  const std::string store = FreshStore("quorum_stale");
  {
    std::unique_ptr<ReplicaQuorum> first =
        *ReplicaQuorum::Start(Settings(store, 0, 1), Files(store));
    ASSERT_TRUE(*first->Vote(0, *first->Join(0, 1, {0}), true));
  }
  FaultToleranceSettings settings = Settings(store, 0, 1);
  settings.join_timeout = std::chrono::milliseconds(200);
  std::unique_ptr<ReplicaQuorum> late = *ReplicaQuorum::Start(settings, Files(store));
  ASSERT_TRUE(late->joining());
  absl::StatusOr<Admission> admission = late->AwaitAdmission();
  ASSERT_FALSE(admission.ok());
  EXPECT_NE(admission.status().message().find(store), std::string::npos) << admission.status();
}

TEST(ReplicaQuorumTest, AGroupRestartedBeforeAnyCommitStartsAfresh) {
  const std::string store = FreshStore("quorum_afresh");
  std::unique_ptr<ReplicaQuorum> a = *ReplicaQuorum::Start(Settings(store, 0, 2), Files(store));
  {
    std::unique_ptr<ReplicaQuorum> lost =
        *ReplicaQuorum::Start(Settings(store, 1, 2), Files(store));
  }
  std::unique_ptr<ReplicaQuorum> again = *ReplicaQuorum::Start(Settings(store, 1, 2), Files(store));
  EXPECT_FALSE(again->joining());
  auto other = std::async(std::launch::async, [&] { return *again->Join(0, 1, {0, 1}); });
  EXPECT_EQ(*a->Join(0, 1, {0, 1}), (Quorum{{0, 1}, {}}));
  EXPECT_EQ(other.get(), (Quorum{{0, 1}, {}}));
}

TEST(ReplicaQuorumTest, GroupsAtDifferentStepsAreAnError) {
  const std::string store = FreshStore("quorum_steps");
  std::unique_ptr<ReplicaQuorum> a = *ReplicaQuorum::Start(Settings(store, 0, 2), Files(store));
  std::unique_ptr<ReplicaQuorum> b = *ReplicaQuorum::Start(Settings(store, 1, 2), Files(store));
  auto other = std::async(std::launch::async, [&] { return b->Join(0, 7, {0, 1}).status(); });
  absl::StatusOr<Quorum> members = a->Join(0, 5, {0, 1});
  EXPECT_FALSE(members.ok());
  EXPECT_FALSE(other.get().ok());
}

}  // namespace
}  // namespace titan
