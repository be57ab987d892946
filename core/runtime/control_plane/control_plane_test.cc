#include "core/runtime/control_plane/control_plane.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/runtime/control_plane/balancer.h"
#include "core/runtime/control_plane/rank_topology.h"
#include "core/runtime/control_plane/timed_communicator.h"
#include "core/runtime/single_process_comm.h"

namespace titan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::vector<int32_t>> PotentialRanks(const ControlInstance& instance) {
  std::vector<std::vector<int32_t>> ranks;
  for (const auto& potential : instance.problem.potential) {
    ranks.emplace_back();
    for (int32_t c : potential) ranks.back().push_back(instance.controller_rank[c]);
  }
  return ranks;
}

TEST(ControlInstance, FromHostnamesOneControllerPerNodeFirst) {
  auto near = BuildControlInstance({"a", "a", "b", "b"}, {"", 3, {}, 2});
  ASSERT_TRUE(near.ok()) << near.status();
  EXPECT_THAT(near->controller_rank, ElementsAre(0, 1, 2));  // a, b, then a again
  using P = std::vector<int32_t>;
  // Nearest first: each rank is its own controller at 0 hops.
  EXPECT_THAT(PotentialRanks(*near), ElementsAre(P{0, 1}, P{1, 0}, P{2}, P{2}));
  // Two hosts are 4 hops apart (rank, host, cluster, host, rank); more controllers than ranks
  // means every rank.
  auto far = BuildControlInstance({"a", "a", "b", "b"}, {"", 9, {}, 4});
  ASSERT_TRUE(far.ok()) << far.status();
  EXPECT_THAT(far->controller_rank, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(far->problem.potential[3].size(), 4);
}

TEST(ControlInstance, ListedRanksBeforeTheCount) {
  auto listed = BuildControlInstance({"a", "a", "b", "b"}, {"", 1, {3, 1}, 4});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(listed->controller_rank, ElementsAre(1, 3));
  for (std::vector<int> bad : {std::vector<int>{4}, std::vector<int>{1, 1}}) {
    auto refused = BuildControlInstance({"a", "a", "b", "b"}, {"", 1, bad, 4});
    ASSERT_FALSE(refused.ok());
    EXPECT_THAT(refused.status().message(),
                HasSubstr(absl::StrCat("control_plane.controller_ranks: rank ", bad.back(),
                                       " is not a rank of this job or listed twice")));
  }
}

class TopologyFile : public testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::filesystem::create_directories(dir_);
    const std::string path = (dir_ / "net.toml").string();
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_ =
      std::filesystem::path(testing::TempDir()) / absl::StrCat("control_plane_topology_", getpid());
};

TEST_F(TopologyFile, RanksByNameOrHostAndTheFilesControllers) {
  // rank0 is named; ranks 1 and 2 hang under their host "h"; the file picks the controllers.
  const std::string path = Write(
      "switches = [\"top\", \"h\", \"rank0\"]\nlinks = [[\"top\", \"h\"], [\"top\", \"rank0\"]]\n"
      "controllers = [\"rank0\", \"rank2\"]\n");
  auto instance = BuildControlInstance({"x", "h", "h"}, {path, 1, {}, 2});
  ASSERT_TRUE(instance.ok()) << instance.status();
  EXPECT_THAT(instance->controller_rank, ElementsAre(0, 2));
  using P = std::vector<int32_t>;
  EXPECT_THAT(PotentialRanks(*instance), ElementsAre(P{0}, P{2}, P{2}));
}

TEST_F(TopologyFile, ARankTheFileLacksIsNamed) {
  const std::string path = Write("switches = [\"h\"]\nlinks = []\n");
  auto instance = BuildControlInstance({"h", "elsewhere"}, {path, 1, {}, 2});
  ASSERT_FALSE(instance.ok());
  EXPECT_THAT(instance.status().message(),
              HasSubstr("rank 1 (host \"elsewhere\") is in no switch of the file: expected a "
                        "switch 'rank1' or 'elsewhere'"));
  EXPECT_THAT(instance.status().message(), HasSubstr(path));
  // Only ranks need a controller: switch g, linked to nothing, is no problem.
  const std::string apart = Write("switches = [\"h\", \"g\"]\nlinks = []\n");
  EXPECT_TRUE(BuildControlInstance({"h", "h"}, {apart, 1, {}, 2}).ok());
  auto far = BuildControlInstance({"h", "h"}, {apart, 1, {}, 1});
  ASSERT_FALSE(far.ok());
  EXPECT_THAT(far.status().message(),
              HasSubstr("control_plane.hops = 1: rank 1 (switch 'rank1') has no controller within "
                        "1 hops; raise control_plane.hops or add controllers"));
}

// Records the instance Rebalance sees and moves nothing.
class StillPolicy : public BalancePlugin {
 public:
  absl::StatusOr<BalanceResult> Assign(const BalanceProblem& problem) override {
    assigned = problem;
    return BalanceResult{std::vector<int32_t>(problem.num_switches(), 0), 1.5};
  }
  absl::StatusOr<RebalanceResult> Rebalance(const BalanceProblem& problem,
                                            const std::vector<int32_t>& current,
                                            const RebalanceGoal& goal) override {
    seen = problem;
    given = current;
    return RebalanceResult{{}, goal.slack * goal.lower_bound, goal.lower_bound};
  }
  BalanceProblem assigned, seen;
  std::vector<int32_t> given;
};

BalanceProblem ThreeSwitches() {
  BalanceProblem problem;
  problem.switch_load = {5, 3, 2};
  problem.controller_capacity.assign(3, std::numeric_limits<double>::infinity());
  problem.potential = {{0, 1}, {1, 2}, {1, 0}};
  problem.distance = {{0, 2}, {0, 2}, {0, 2}};
  return problem;
}

TEST(Balancer, LostControllersWorkersMoveToTheLeastLoadedLiveOne) {
  StillPolicy policy;
  auto balanced = RebalanceControllers(policy, ThreeSwitches(), {0, 1, 1}, {false, true, false});
  ASSERT_TRUE(balanced.ok()) << balanced.status();
  // Switch 1 goes to 2 and switch 2 to 0: the only live controllers each may use.
  EXPECT_THAT(balanced->controller_of, ElementsAre(0, 2, 0));
  EXPECT_THAT(policy.given, ElementsAre(0, 2, 0));
  EXPECT_THAT(policy.seen.potential[2], ElementsAre(0));  // the lost controller is gone
  EXPECT_FALSE(balanced->policy_bound);
  EXPECT_DOUBLE_EQ(balanced->lower_bound, 5.0);  // max(heaviest 5, total 10 / 2 live)
  auto assigned = AssignControllers(policy, ThreeSwitches(), {false, true, false});
  ASSERT_TRUE(assigned.ok());
  EXPECT_THAT(policy.assigned.potential[2], ElementsAre(0));  // lost before the first one too
  EXPECT_TRUE(assigned->policy_bound);
  EXPECT_DOUBLE_EQ(assigned->lower_bound, 1.5);
}

TEST(Balancer, ARankWithNoLiveControllerIsNamed) {
  StillPolicy policy;
  auto balanced = RebalanceControllers(policy, ThreeSwitches(), {0, 1, 1}, {false, true, true});
  ASSERT_FALSE(balanced.ok());
  EXPECT_THAT(balanced.status().message(), HasSubstr("rank 1 has no live controller"));
}

// Waits 50 ms in every barrier and in waiting for a send or a started all-gather.
class SlowBarrier : public SingleProcessCommunicator {
 public:
  class SlowTransfer : public Transfer {
   public:
    absl::Status Wait() override {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return absl::OkStatus();
    }
  };
  absl::StatusOr<std::unique_ptr<Transfer>> StartSend(const TensorView&, int, int) override {
    return std::unique_ptr<Transfer>(new SlowTransfer());
  }
  absl::StatusOr<std::unique_ptr<Transfer>> StartAllGather(const TensorView&, TensorView,
                                                           const StreamOrder&) override {
    return std::unique_ptr<Transfer>(new SlowTransfer());
  }
  absl::Status Barrier() override {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int, int) override {
    return std::unique_ptr<Communicator>(new SlowBarrier());
  }
};

// A communicator with an all-to-all of its own (as MPI's Alltoallv), which the timed one must
// reach rather than the default one over Exchange.
class NativeAllToAll : public SlowBarrier {
 public:
  absl::Status AllToAll(const TensorView&, std::span<const int64_t>, TensorView,
                        std::span<const int64_t>) override {
    ++calls;
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<Transfer>> Exchange(std::span<const PeerMessage>) override {
    return absl::InternalError("the default all-to-all ran");
  }
  int calls = 0;
};

TEST(TimedCommunicator, PassesAnAllToAllToTheCommunicatorsOwn) {
  auto native = std::make_unique<NativeAllToAll>();
  NativeAllToAll& inner = *native;
  std::unique_ptr<Communicator> world = TimeCommunication(std::move(native));
  float x = 0.0f;
  const std::vector<int64_t> counts = {1};
  absl::Status done = world->AllToAll(FlatF32(&x, 1), counts, FlatF32(&x, 1), counts);
  EXPECT_TRUE(done.ok()) << done;
  EXPECT_EQ(inner.calls, 1);
}

TEST(TimedCommunicator, CountsTheCreatingThreadsWaitsAlsoOnSplits) {
  std::unique_ptr<Communicator> world = TimeCommunication(std::make_unique<SlowBarrier>());
  const CommunicationClock* clock = CommunicationClockOf(*world);
  ASSERT_NE(clock, nullptr);
  std::thread([&] { ASSERT_TRUE(world->Barrier().ok()); }).join();
  EXPECT_EQ(clock->seconds(), 0.0);  // another thread's wait is not the training thread's
  ASSERT_TRUE(world->Barrier().ok());
  const double once = clock->seconds();
  EXPECT_GE(once, 0.05);
  auto part = world->Split(0, 0);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(CommunicationClockOf(**part), clock);
  ASSERT_TRUE((*part)->Barrier().ok());
  const double twice = clock->seconds();
  EXPECT_GE(twice, once + 0.05);
  // A non-blocking send is passed through; the wait for it is timed.
  auto send = (*part)->StartSend(TensorView{}, 0, 0);
  ASSERT_TRUE(send.ok()) << send.status();
  ASSERT_TRUE((*send)->Wait().ok());
  EXPECT_GE(clock->seconds(), twice + 0.05);
  EXPECT_TRUE(absl::IsUnimplemented(world->StartRecv(TensorView{}, 0, 0).status()));
  // An exchange reaches the inner communicator's own (which refuses a peer on one rank), not
  // the default made of StartSend calls (which SlowBarrier would accept).
  const PeerMessage message{PeerMessage::Kind::kSend, TensorView{}, 0, 0};
  EXPECT_TRUE(absl::IsFailedPrecondition(world->Exchange({&message, 1}).status()));
  // So does a started all-gather, whose wait is timed.
  const double before_gather = clock->seconds();
  auto gather = world->StartAllGather(TensorView{}, TensorView{}, StreamOrder{});
  ASSERT_TRUE(gather.ok()) << gather.status();
  ASSERT_TRUE((*gather)->Wait().ok());
  EXPECT_GE(clock->seconds(), before_gather + 0.05);
  SingleProcessCommunicator plain;
  EXPECT_EQ(CommunicationClockOf(plain), nullptr);
}

// One rank whose all-gathers fail from the `fail_from`-th on (0: never).
class FailingGather : public SingleProcessCommunicator {
 public:
  explicit FailingGather(int fail_from) : fail_from_(fail_from) {}
  absl::Status AllGather(const TensorView& input, TensorView output) override {
    if (fail_from_ > 0 && ++calls_ >= fail_from_) return absl::AbortedError("gather broke");
    return SingleProcessCommunicator::AllGather(input, output);
  }

 private:
  int fail_from_, calls_ = 0;
};

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(ControlPlane, OneRankLogsItsAssignmentAndAFailureStopsOnlyTheControlPlane) {
  const std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) / absl::StrCat("control_one_", getpid());
  std::filesystem::create_directories(dir);
  for (int fail_from : {0, 2}) {
    auto instance = BuildControlInstance({"h"}, {"", 1, {}, 2});
    ASSERT_TRUE(instance.ok()) << instance.status();
    StillPolicy policy;
    ControlSettings settings;
    settings.policy = &policy;
    settings.policy_name = "still";
    settings.log_freq = 100;
    settings.jsonl_path = (dir / absl::StrCat("fail_from_", fail_from, ".jsonl")).string();
    {
      ControlPlane control(
          std::make_unique<ControlRounds>(std::make_unique<FailingGather>(fail_from),
                                          std::move(*instance), settings),
          nullptr, 0.0);
      for (int step = 1; step <= 3; ++step) control.AfterStep(step, 2.5);
    }  // finishes the three rounds, or stops at the failing one, without hanging
    std::vector<std::string> lines = Lines(settings.jsonl_path);
    ASSERT_GE(lines.size(), 2u);
    EXPECT_THAT(lines[0], HasSubstr("\"event\":\"controller\""));
    EXPECT_THAT(lines[0], HasSubstr("\"step\":1"));
    EXPECT_THAT(lines[1], HasSubstr("\"event\":\"assignment\""));
    EXPECT_THAT(lines[1], HasSubstr("\"lower_bound\":1.5"));  // the policy's
    EXPECT_THAT(lines[1], HasSubstr("\"why\":\"start\""));
    // Rounds 2 and 3 log no controller record (log_freq 100) and possibly a drift; after a
    // failed gather at round 2 nothing more is written.
    if (fail_from == 2) {
      EXPECT_EQ(lines.size(), 2u);
    }
  }
}

}  // namespace
}  // namespace titan
