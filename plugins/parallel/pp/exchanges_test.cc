#include "plugins/parallel/pp/exchanges.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace titan::pp {
namespace {

using ::testing::HasSubstr;

std::vector<Action> Actions(const std::vector<std::string>& names) {
  std::vector<Action> actions;
  for (const std::string& name : names) actions.push_back(*ParseAction(name));
  return actions;
}

// Two ranks, stage s on rank s % 2, lowered by hand.
Schedule TwoRanks(int stages, int microbatches, const std::vector<std::string>& rank0,
                  const std::vector<std::string>& rank1) {
  Schedule s;
  s.name = "handmade";
  s.ranks = 2;
  s.stages = stages;
  s.microbatches = microbatches;
  for (int stage = 0; stage < stages; ++stage) s.stage_rank.push_back(stage % 2);
  s.actions = {Actions(rank0), Actions(rank1)};
  s.lowered = true;
  return s;
}

TEST(PpExchanges, GroupsEachRunOfSendsAndReceivesAndLeavesComputeAlone) {
  const std::vector<ExchangeStep> steps = GroupExchanges(
      Actions({"0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "0B1", "0RECV_B1"}));
  const std::vector<std::pair<bool, std::vector<int>>> expected = {
      {false, {0}}, {true, {1}},  {false, {2}}, {true, {3, 4}},
      {false, {5}}, {false, {6}}, {true, {7}}};
  ASSERT_EQ(steps.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(steps[i].exchange, expected[i].first) << i;
    EXPECT_EQ(steps[i].actions, expected[i].second) << i;
  }
}

TEST(PpExchanges, TagsTellEveryMessageOfAStepApart) {
  EXPECT_EQ(MessageTag(0, 0, 4, false), 0);
  EXPECT_EQ(MessageTag(0, 0, 4, true), 1);
  EXPECT_EQ(MessageTag(1, 2, 4, false), 12);
  EXPECT_EQ(MessageTag(1, 2, 4, true), 13);
}

// 1F1B's steady state: rank 0 sends F1 while waiting for the gradient of microbatch 0, and rank
// 1 sends that gradient while waiting for F1. One call at a time, in issue order on one stream,
// each rank's send would wait for the peer's receive behind the peer's own send; grouped, both
// complete.
TEST(PpExchanges, OneFOneBCompletesAlthoughBothRanksSendBeforeTheyReceive) {
  const Schedule s =
      TwoRanks(2, 2, {"0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "0RECV_B1", "0B1"},
               {"1RECV_F0", "1F0", "1B0", "1SEND_B0", "1RECV_F1", "1F1", "1B1", "1SEND_B1"});
  ASSERT_TRUE(Check(s).ok()) << Check(s);
  EXPECT_TRUE(CheckExchanges(s).ok()) << CheckExchanges(s);
}

// Four stages looped over two ranks. Rank 0 sends stage 0's microbatch 1 in the exchange that
// receives stage 2's input; rank 1 receives that microbatch only after it has received stage
// 3's input, which rank 0 sends after it. Check passes (its sends never block, as MPI's
// StartSend); exchanges that complete as a whole wait on each other.
TEST(PpExchanges, ExchangesThatWaitOnEachOtherAreADeadlockNamingBothRanks) {
  const Schedule s = TwoRanks(
      4, 2, {"0F0",      "0SEND_F0", "0F1",      "0SEND_F1", "2RECV_F0", "2F0",      "2SEND_F0",
             "2RECV_F1", "2F1",      "2SEND_F1", "2RECV_B0", "2B0",      "2SEND_B0", "2RECV_B1",
             "2B1",      "2SEND_B1", "0RECV_B0", "0B0",      "0RECV_B1", "0B1"},
      {"1RECV_F0", "1F0", "1SEND_F0", "3RECV_F0", "3F0", "3B0",     "3SEND_B0",
       "1RECV_F1", "1F1", "1SEND_F1", "3RECV_F1", "3F1", "3B1",     "3SEND_B1",
       "1RECV_B0", "1B0", "1SEND_B0", "1RECV_B1", "1B1", "1SEND_B1"});
  ASSERT_TRUE(Check(s).ok()) << Check(s);
  EXPECT_THAT(CheckExchanges(s).message(),
              HasSubstr("deadlocks once each run of sends and receives is one exchange that "
                        "completes as a whole: rank 0, action 3 (0SEND_F1) waits for 1RECV_F1 on "
                        "rank 1; rank 1, action 3 (3RECV_F0) waits for 2SEND_F0 on rank 0"));
}

// Rank 0 sends microbatch 1 before microbatch 0; rank 1 receives them the other way round. MPI
// pairs them by tag; NCCL, in order, would hand microbatch 1's activations to microbatch 0.
TEST(PpExchanges, SendsAndReceivesInAnotherOrderAreRefusedNamingTheFirstPair) {
  const Schedule s =
      TwoRanks(2, 2, {"0F0", "0F1", "0SEND_F1", "0SEND_F0", "0RECV_B0", "0B0", "0RECV_B1", "0B1"},
               {"1RECV_F0", "1RECV_F1", "1F0", "1B0", "1SEND_B0", "1F1", "1B1", "1SEND_B1"});
  ASSERT_TRUE(Check(s).ok()) << Check(s);
  EXPECT_THAT(CheckExchanges(s).message(),
              HasSubstr("rank 0, action 2 (0SEND_F1) is send number 1 to rank 1, whose receive "
                        "number 1 is 1RECV_F0: a communicator without message tags (nccl) pairs "
                        "sends and receives in the order they are issued"));
}

// Every built-in schedule, at the sizes the schedule tests cover, issues its sends and
// receives in the same order on both ranks of each pair, so a communicator without tags pairs
// them right. GPipe and 1F1B also run as grouped exchanges that hold up the next (nccl); the
// multi-stage schedules have a send alone in an exchange whose receive sits behind the peer's
// own, and are refused there, naming the deadlock.
TEST(PpExchanges, BuiltInSchedulesPairInIssueOrderAndGPipeAnd1F1BNeverDeadlock) {
  int checked = 0, single_stage = 0;
  for (const std::string& name : ScheduleNames()) {
    const bool multi = *IsMultiStage(name);
    const bool v = *PlacementOf(name) == StagePlacement::kV;
    const std::vector<int> per_rank = !multi ? std::vector<int>{1}
                                      : v    ? std::vector<int>{2}
                                             : std::vector<int>{2, 4};
    for (int ranks : {2, 3, 4, 8}) {
      for (int stages_per_rank : per_rank) {
        for (int microbatches : {1, 2, 3, 4, 5, 6, 8, 9, 12, 16}) {
          absl::StatusOr<Schedule> s = Generate(name, ranks, stages_per_rank, microbatches);
          if (!s.ok()) continue;  // a size the schedule refuses (schedule_test checks which)
          const Schedule lowered = Lower(*s);
          ASSERT_TRUE(Check(lowered).ok()) << Check(lowered);
          absl::Status grouped = CheckExchanges(lowered);
          const std::string where = absl::StrCat(name, " ranks ", ranks, " stages per rank ",
                                                 stages_per_rank, " microbatches ", microbatches);
          if (!multi) {
            EXPECT_TRUE(grouped.ok()) << where << ": " << grouped;
            ++single_stage;
          } else if (!grouped.ok()) {
            EXPECT_THAT(grouped.message(), HasSubstr("deadlocks once each run")) << where;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(single_stage, 60);
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace titan::pp
