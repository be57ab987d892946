// The quorum's store in etcd, against a real three-member cluster on loopback ports: what the
// quorum relies on (one winner of a put-if-absent, whole values, listing, deletion) holds, and
// keeps holding with a member lost; no member answering is an error naming the endpoints.
#include "core/fault_tolerance/etcd_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>

#include "core/fault_tolerance/replica_quorum.h"
#include "tests/support/etcd_cluster.h"

namespace titan {
namespace {

using testing::EtcdCluster;

std::filesystem::path Folder(const std::string& name) {
  return std::filesystem::path(::testing::TempDir()) / ("etcd_store_" + std::to_string(getpid())) /
         name;
}

// A store on `cluster`, once its members have elected a leader.
std::unique_ptr<QuorumStore> Open(const EtcdCluster& cluster, const std::string& prefix) {
  auto store = EtcdQuorumStore(cluster.endpoints(), prefix, std::chrono::seconds(60));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

#define REQUIRE_ETCD()                                                                     \
  if (!EtcdCluster::Installed()) {                                                         \
    GTEST_SKIP() << "no " << testing::kEtcd << ": install etcd-server (tools/setup-deps)"; \
  }

TEST(EtcdStoreTest, APutIfAbsentHasOneWinnerAndKeysReadBackWhole) {
  REQUIRE_ETCD();
  EtcdCluster cluster(3, Folder("winner"));
  ASSERT_TRUE(cluster.started());
  std::unique_ptr<QuorumStore> store = Open(cluster, "/titan/test-winner");
  ASSERT_NE(store, nullptr);

  // Eight writers race for one decision: one wins, and every reader sees its value.
  std::vector<std::future<bool>> writers;
  for (int w = 0; w < 8; ++w) {
    writers.push_back(std::async(std::launch::async, [&, w] {
      absl::Status put = store->PutIfAbsent("rounds/1/quorum", "writer " + std::to_string(w));
      EXPECT_TRUE(put.ok() || absl::IsAlreadyExists(put)) << put;
      return put.ok();
    }));
  }
  int winners = 0;
  std::string winner;
  for (int w = 0; w < 8; ++w) {
    if (writers[w].get()) {
      ++winners;
      winner = "writer " + std::to_string(w);
    }
  }
  EXPECT_EQ(winners, 1);
  EXPECT_EQ(store->Get("rounds/1/quorum")->value_or("none"), winner);

  ASSERT_TRUE(store->Put("heartbeats/0", "a:1").ok());
  ASSERT_TRUE(store->Put("heartbeats/0", "a:2").ok());
  EXPECT_EQ(store->Get("heartbeats/0")->value_or("none"), "a:2");
  const std::string binary("\0\xff\n end", 7);
  ASSERT_TRUE(store->Put("gloo/round0/rank0/0", binary).ok());
  EXPECT_EQ(store->Get("gloo/round0/rank0/0")->value_or("none"), binary);
  ASSERT_TRUE(store->Put("started", "").ok());  // an empty value is still a value
  EXPECT_EQ(store->Get("started")->value_or("none"), "");
  EXPECT_FALSE(store->Get("never")->has_value());

  ASSERT_TRUE(store->Put("requests/2", "x").ok());
  ASSERT_TRUE(store->Put("requests/10", "y").ok());
  ASSERT_TRUE(store->Put("requests/10/deeper", "z").ok());
  std::vector<std::string> listed = *store->List("requests");
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, (std::vector<std::string>{"10", "2"}));
  ASSERT_TRUE(store->Delete("requests/2").ok());
  EXPECT_EQ(*store->List("requests"), (std::vector<std::string>{"10"}));

  ASSERT_TRUE(store->DeleteFolder("rounds/1").ok());
  EXPECT_FALSE(store->Get("rounds/1/quorum")->has_value());
  // Another run's prefix sees none of it.
  std::unique_ptr<QuorumStore> other = Open(cluster, "/titan/test-other");
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(other->Get("heartbeats/0")->has_value());
  EXPECT_NE(store->Describe().find(cluster.endpoints()[0]), std::string::npos);
}

TEST(EtcdStoreTest, TheQuorumGoesOnWithAMemberLost) {
  REQUIRE_ETCD();
  EtcdCluster cluster(3, Folder("lost"));
  ASSERT_TRUE(cluster.started());
  std::unique_ptr<QuorumStore> store = Open(cluster, "/titan/test-lost");
  ASSERT_NE(store, nullptr);
  FaultToleranceSettings settings;
  settings.enable = true;
  settings.group_size = 3;
  settings.heartbeat_timeout = std::chrono::milliseconds(10000);
  settings.join_timeout = std::chrono::milliseconds(10000);
  std::vector<std::unique_ptr<ReplicaQuorum>> groups;
  for (int id = 0; id < 3; ++id) {
    settings.replica_id = id;
    auto quorum = ReplicaQuorum::Start(settings, *store);
    ASSERT_TRUE(quorum.ok()) << quorum.status();
    groups.push_back(std::move(*quorum));
  }
  auto round = [&](int64_t number) {
    std::vector<std::future<std::pair<Quorum, bool>>> runs;
    for (int id = 0; id < 3; ++id) {
      runs.push_back(std::async(std::launch::async, [&, id] {
        absl::StatusOr<Quorum> quorum = groups[id]->Join(number, number + 1, {0, 1, 2});
        EXPECT_TRUE(quorum.ok()) << quorum.status();
        absl::StatusOr<bool> commit = groups[id]->Vote(number, quorum.value_or(Quorum{}), true);
        EXPECT_TRUE(commit.ok()) << commit.status();
        return std::make_pair(quorum.value_or(Quorum{}), commit.value_or(false));
      }));
    }
    for (auto& run : runs) {
      EXPECT_EQ(run.get(), std::make_pair(Quorum{{0, 1, 2}, {}}, true)) << "round " << number;
    }
  };
  round(0);
  cluster.Kill(0);  // the member every call tried first
  round(1);
  groups.clear();   // their heartbeats would wait on a cluster without a majority
  cluster.Kill(1);  // one member of three left: no majority, no decision
  auto lonely = EtcdQuorumStore({cluster.endpoints()[2]}, "/titan/test-lost",
                                std::chrono::milliseconds(1500));
  ASSERT_TRUE(lonely.ok() || absl::IsUnavailable(lonely.status())) << lonely.status();
  if (lonely.ok()) {
    EXPECT_FALSE((*lonely)->PutIfAbsent("rounds/9/quorum", "0|").ok());
  }
}

TEST(EtcdStoreTest, NoMemberAnsweringIsAnErrorNamingTheEndpoints) {
  const std::string nobody = "http://127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  auto store = EtcdQuorumStore({nobody}, "/titan/none", std::chrono::milliseconds(300));
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(absl::IsUnavailable(store.status())) << store.status();
  EXPECT_NE(store.status().message().find("fault_tolerance.etcd_endpoints = " + nobody),
            std::string::npos)
      << store.status();
}

}  // namespace
}  // namespace titan
