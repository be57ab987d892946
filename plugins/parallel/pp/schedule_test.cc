#include "plugins/parallel/pp/schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace titan::pp {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr ActionType kF = ActionType::kForward;
constexpr ActionType kB = ActionType::kBackward;
constexpr ActionType kI = ActionType::kBackwardInput;
constexpr ActionType kW = ActionType::kBackwardWeight;

std::vector<std::string> Names(const std::vector<Action>& actions) {
  std::vector<std::string> names;
  for (const Action& a : actions) names.push_back(ActionName(a));
  return names;
}

Schedule GenerateOrDie(absl::string_view name, int ranks, int stages_per_rank, int microbatches) {
  absl::StatusOr<Schedule> s = Generate(name, ranks, stages_per_rank, microbatches);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : Schedule{};
}

double Bubble(absl::string_view name, int ranks, int stages_per_rank, int microbatches) {
  absl::StatusOr<double> bubble =
      TheoreticalBubble(Lower(GenerateOrDie(name, ranks, stages_per_rank, microbatches)));
  EXPECT_TRUE(bubble.ok()) << bubble.status();
  return bubble.ok() ? *bubble : -1.0;
}

// A hand-made schedule of `ranks` ranks with stage s on rank s % ranks.
Schedule Handmade(int ranks, int stages, int microbatches,
                  std::vector<std::vector<Action>> actions) {
  Schedule s;
  s.name = "handmade";
  s.ranks = ranks;
  s.stages = stages;
  s.microbatches = microbatches;
  for (int stage = 0; stage < stages; ++stage) s.stage_rank.push_back(stage % ranks);
  s.actions = std::move(actions);
  s.lowered = true;
  return s;
}

class TempFile {
 public:
  explicit TempFile(absl::string_view text) {
    static int count = 0;
    path_ = (std::filesystem::path(testing::TempDir()) /
             absl::StrCat("titan_pp_schedule_", getpid(), "_", count++, ".csv"))
                .string();
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(PpActionText, RoundTripsEveryType) {
  for (ActionType type : {kF, kB, kI, kW, ActionType::kSendForward, ActionType::kRecvForward,
                          ActionType::kSendBackward, ActionType::kRecvBackward}) {
    const Action action{type, 12, 345};
    absl::StatusOr<Action> parsed = ParseAction(ActionName(action));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, action) << ActionName(action);
  }
  EXPECT_EQ(ActionName({kF, 0, 3}), "0F3");
  EXPECT_EQ(ActionName({ActionType::kRecvBackward, 0, 5}), "0RECV_B5");
  EXPECT_EQ(*ParseAction(" 2SEND_F1 "), (Action{ActionType::kSendForward, 2, 1}));
}

TEST(PpActionText, RefusesMalformedNamingTheTextAndTheExpectedForm) {
  for (absl::string_view bad : {"F0", "1X0", "1F", "1F0x", "", "-1F0", "1SEND0", "99999999999F0"}) {
    absl::StatusOr<Action> parsed = ParseAction(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(parsed.status().message(),
                AllOf(HasSubstr(absl::StrCat("'", bad, "'")), HasSubstr("e.g. 2F0")));
  }
}

TEST(PpScheduleNames, AreTorchTitansWithTheirPlacement) {
  EXPECT_THAT(ScheduleNames(),
              ::testing::ElementsAre("GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS",
                                     "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"));
  EXPECT_FALSE(*IsMultiStage("GPipe"));
  EXPECT_FALSE(*IsMultiStage("1F1B"));
  EXPECT_TRUE(*IsMultiStage("interleaved1f1b"));  // case-insensitive, as PyTorch
  EXPECT_EQ(*PlacementOf("LoopedBFS"), StagePlacement::kLoop);
  EXPECT_EQ(*PlacementOf("ZBVZeroBubble"), StagePlacement::kV);
  EXPECT_EQ(*PlacementOf("DualPipeV"), StagePlacement::kV);
  absl::StatusOr<bool> unknown = IsMultiStage("Interleaved1F1b2");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(),
              AllOf(HasSubstr("'Interleaved1F1b2'"), HasSubstr("GPipe, 1F1B, Interleaved1F1B")));
  EXPECT_FALSE(Generate("Bogus", 2, 1, 2).ok());
}

TEST(PpGenerate, PlacesStagesInLoopsOrInAV) {
  EXPECT_EQ(GenerateOrDie("Interleaved1F1B", 4, 2, 4).stage_rank,
            (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  const Schedule v = GenerateOrDie("ZBVZeroBubble", 4, 2, 8);
  EXPECT_EQ(v.stage_rank, (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_EQ(v.stages, 8);
  EXPECT_FALSE(v.lowered);
}

TEST(PpGenerate, RefusesWhatDoesNotFitNamingIt) {
  struct Case {
    const char* name;
    int ranks, stages_per_rank, microbatches;
    const char* expected;
  };
  for (const Case& c : {
           Case{"ZBVZeroBubble", 2, 4, 8, "expected 2 stages per rank"},
           Case{"DualPipeV", 2, 1, 8, "expected 2 stages per rank"},
           Case{"1F1B", 2, 2, 8, "expected 1 stage per rank"},
           Case{"Interleaved1F1B", 4, 2, 9, "multiple of the 2 rounds"},
           Case{"InterleavedZeroBubble", 2, 2, 5, "multiple of the 2 rounds"},
           Case{"DualPipeV", 4, 2, 7, "at least as many microbatches as the 8 stages"},
           Case{"GPipe", 2, 1, 0, "expected at least 1"},
       }) {
    absl::StatusOr<Schedule> s = Generate(c.name, c.ranks, c.stages_per_rank, c.microbatches);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_THAT(s.status().message(), AllOf(HasSubstr(c.name), HasSubstr(c.expected)));
  }
}

TEST(PpGenerate, GPipeRunsAllForwardsThenAllBackwards) {
  EXPECT_THAT(Names(GenerateOrDie("GPipe", 2, 1, 3).actions[1]),
              ::testing::ElementsAre("1F0", "1F1", "1F2", "1B0", "1B1", "1B2"));
}

TEST(PpGenerate, OneFOneBWarmsUpRunsOneForwardOneBackwardThenCoolsDown) {
  // Rank 1 of 4: 4 - 1 - 1 = 2 warm-up forwards.
  EXPECT_THAT(Names(GenerateOrDie("1F1B", 4, 1, 6).actions[1]),
              ::testing::ElementsAre("1F0", "1F1", "1F2", "1B0", "1F3", "1B1", "1F4", "1B2", "1F5",
                                     "1B3", "1B4", "1B5"));
  EXPECT_THAT(Names(GenerateOrDie("1F1B", 4, 1, 2).actions[3]),
              ::testing::ElementsAre("3F0", "3B0", "3F1", "3B1"));
}

TEST(PpGenerate, LoopedBfsRunsEachLocalStageThenBackwardsInReverse) {
  EXPECT_THAT(Names(GenerateOrDie("LoopedBFS", 2, 2, 2).actions[0]),
              ::testing::ElementsAre("0F0", "0F1", "2F0", "2F1", "2B1", "2B0", "0B1", "0B0"));
}

TEST(PpGenerate, InterleavedOneFOneBIsDepthFirst) {
  // As PyTorch orders it for 2 ranks, 2 stages per rank, 4 microbatches: rank 0 warms up
  // (2 - 1) x 2 + 2 x 1 = 4 forwards, a round of 2 microbatches per local stage.
  EXPECT_THAT(Names(GenerateOrDie("Interleaved1F1B", 2, 2, 4).actions[0]),
              ::testing::ElementsAre("0F0", "0F1", "2F0", "2F1", "0F2", "2B0", "0F3", "2B1", "2F2",
                                     "0B0", "2F3", "0B1", "2B2", "2B3", "0B2", "0B3"));
}

TEST(PpGenerate, ZeroBubbleSchedulesSplitTheBackward) {
  for (const char* name : {"InterleavedZeroBubble", "ZBVZeroBubble"}) {
    const Schedule s = GenerateOrDie(name, 4, 2, 8);
    int inputs = 0, weights = 0;
    for (const auto& actions : s.actions) {
      for (const Action& a : actions) {
        EXPECT_NE(a.type, kB) << name << " " << ActionName(a);
        inputs += a.type == kI;
        weights += a.type == kW;
      }
    }
    EXPECT_EQ(inputs, 8 * 8) << name;
    EXPECT_EQ(weights, 8 * 8) << name;
  }
}

// Whether Generate must accept the combination, by the rules PyTorch states.
bool Fits(absl::string_view name, int ranks, int microbatches) {
  if (name == "Interleaved1F1B" || name == "InterleavedZeroBubble") {
    return microbatches % std::max(1, microbatches / ranks) == 0;
  }
  if (name == "DualPipeV") return microbatches >= 2 * ranks;  // one per stage
  return true;
}

TEST(PpEverySchedule, PassesCheckAfterLowerAndComputesEachStageMicrobatchOncePerDirection) {
  int checked = 0;
  for (const std::string& name : ScheduleNames()) {
    const bool multi = *IsMultiStage(name);
    const bool v = *PlacementOf(name) == StagePlacement::kV;
    const std::vector<int> per_rank = !multi ? std::vector<int>{1}
                                      : v    ? std::vector<int>{2}
                                             : std::vector<int>{2, 4};
    for (int ranks : {2, 4}) {
      for (int stages_per_rank : per_rank) {
        for (int microbatches : {1, 2, 3, 4, 5, 6, 8, 9, 12, 16}) {
          SCOPED_TRACE(absl::StrCat(name, " ranks ", ranks, " stages per rank ", stages_per_rank,
                                    " microbatches ", microbatches));
          absl::StatusOr<Schedule> s = Generate(name, ranks, stages_per_rank, microbatches);
          ASSERT_EQ(s.ok(), Fits(name, ranks, microbatches)) << s.status();
          if (!s.ok()) continue;
          const Schedule lowered = Lower(*s);
          ASSERT_TRUE(Check(lowered).ok()) << Check(lowered);
          // Counted here without the checker: F once, and B once or I and W once each, on the
          // rank that holds the stage.
          std::map<std::pair<int, int>, std::map<ActionType, int>> count;
          for (int r = 0; r < ranks; ++r) {
            for (const Action& a : s->actions[r]) {
              ASSERT_EQ(s->stage_rank[a.stage], r) << ActionName(a);
              ++count[{a.stage, a.microbatch}][a.type];
            }
          }
          ASSERT_EQ(count.size(), static_cast<size_t>(s->stages * microbatches));
          for (auto& [key, types] : count) {
            EXPECT_EQ(types[kF], 1);
            EXPECT_EQ(types[kB] + types[kI], 1);
            EXPECT_EQ(types[kI], types[kW]);
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(PpBubble, GPipeAndOneFOneBAreRanksMinusOneOverMicrobatchesPlusRanksMinusOne) {
  for (int p : {2, 4}) {
    for (int m : {1, 3, 4, 8, 16}) {
      const double expected = (p - 1.0) / (m + p - 1.0);
      EXPECT_DOUBLE_EQ(Bubble("GPipe", p, 1, m), expected) << p << " " << m;
      EXPECT_DOUBLE_EQ(Bubble("1F1B", p, 1, m), expected) << p << " " << m;
    }
  }
}

TEST(PpBubble, MatchesTheClosedFormsOfTheMultiStageSchedules) {
  for (int p : {2, 4}) {
    for (int k : {1, 2, 4}) {
      const int m = k * p;
      for (int v : {2, 4}) {
        // Interleaving v stages divides the 1F1B bubble by v (Narayanan et al.).
        const double interleaved = (p - 1.0) / (v * m + p - 1.0);
        EXPECT_DOUBLE_EQ(Bubble("Interleaved1F1B", p, v, m), interleaved) << p << " " << m;
        EXPECT_DOUBLE_EQ(Bubble("LoopedBFS", p, v, m), interleaved) << p << " " << m;
        // With W filling the bubbles only the first forwards' ramp of p - 1 stays idle.
        EXPECT_DOUBLE_EQ(Bubble("InterleavedZeroBubble", p, v, m),
                         (p - 1.0) / (3.0 * v * m + p - 1.0))
            << p << " " << m;
      }
      const double v_shape = (p - 1.0) / (6.0 * m + p - 1.0);
      if (m >= 2 * p - 1) {
        EXPECT_DOUBLE_EQ(Bubble("ZBVZeroBubble", p, 2, m), v_shape) << m;
      }
      if (m >= 2 * p) {
        EXPECT_DOUBLE_EQ(Bubble("DualPipeV", p, 2, m), v_shape) << m;
      }
    }
  }
}

TEST(PpBubble, IsOrderedAsTheLiteratureSays) {
  for (int p : {2, 4}) {
    for (int m : {2 * p, 4 * p}) {
      SCOPED_TRACE(absl::StrCat("ranks ", p, " microbatches ", m));
      const double one_f_one_b = Bubble("1F1B", p, 1, m);
      const double interleaved = Bubble("Interleaved1F1B", p, 2, m);
      EXPECT_DOUBLE_EQ(Bubble("GPipe", p, 1, m), one_f_one_b);
      EXPECT_LT(interleaved, one_f_one_b);
      for (const char* zero_bubble : {"InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"}) {
        EXPECT_LT(Bubble(zero_bubble, p, 2, m), interleaved) << zero_bubble;
      }
    }
  }
}

TEST(PpPeakInFlight, OneFOneBHoldsRanksMinusRankAndGPipeEveryMicrobatch) {
  for (int p : {2, 4}) {
    const Schedule one_f_one_b = Lower(GenerateOrDie("1F1B", p, 1, 8));
    const Schedule gpipe = Lower(GenerateOrDie("GPipe", p, 1, 8));
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(PeakInFlight(one_f_one_b, r), p - r) << p << " " << r;
      EXPECT_EQ(PeakInFlight(gpipe, r), 8) << p << " " << r;
    }
  }
  // A split backward holds its activations until the W.
  const Schedule split = Handmade(1, 1, 2, {{{kF, 0, 0}, {kI, 0, 0}, {kF, 0, 1}, {kW, 0, 0}}});
  EXPECT_EQ(PeakInFlight(split, 0), 2);
}

TEST(PpLower, ReceivesRightBeforeAndSendsRightAfterTheCompute) {
  const Schedule lowered = Lower(GenerateOrDie("1F1B", 2, 1, 1));
  EXPECT_TRUE(lowered.lowered);
  EXPECT_THAT(Names(lowered.actions[0]),
              ::testing::ElementsAre("0F0", "0SEND_F0", "0RECV_B0", "0B0"));
  EXPECT_THAT(Names(lowered.actions[1]),
              ::testing::ElementsAre("1RECV_F0", "1F0", "1B0", "1SEND_B0"));
  EXPECT_EQ(Lower(lowered).actions, lowered.actions);  // idempotent
}

TEST(PpLower, StagesOnTheSameRankHandOverWithoutCommunication) {
  // V placement on 2 ranks: rank 1 holds stages 1 and 2, rank 0 stages 0 and 3.
  const Schedule lowered = Lower(GenerateOrDie("ZBVZeroBubble", 2, 2, 3));
  for (const Action& a : lowered.actions[1]) {
    const bool between_1_and_2 = (a.type == ActionType::kSendForward && a.stage == 1) ||
                                 (a.type == ActionType::kRecvForward && a.stage == 2) ||
                                 (a.type == ActionType::kSendBackward && a.stage == 2) ||
                                 (a.type == ActionType::kRecvBackward && a.stage == 1);
    EXPECT_FALSE(between_1_and_2) << ActionName(a);
  }
  int sends = 0;
  for (const Action& a : lowered.actions[0]) sends += a.type == ActionType::kSendForward;
  EXPECT_EQ(sends, 3);  // stage 0's outputs only: stage 3 is the last
}

TEST(PpCheck, ReportsEveryBlockedRankOfADeadlock) {
  // Each rank waits for the other's gradient before sending its own.
  const Schedule s = Handmade(2, 2, 1,
                              {{{kF, 0, 0},
                                {ActionType::kRecvBackward, 0, 0},
                                {ActionType::kSendForward, 0, 0},
                                {kB, 0, 0}},
                               {{ActionType::kRecvForward, 1, 0},
                                {kF, 1, 0},
                                {kB, 1, 0},
                                {ActionType::kSendBackward, 1, 0}}});
  const absl::Status status = Check(s);
  EXPECT_THAT(status.message(),
              AllOf(HasSubstr("deadlock"),
                    HasSubstr("rank 0, action 1 (0RECV_B0) waits for 1SEND_B0 on rank 1"),
                    HasSubstr("rank 1, action 0 (1RECV_F0) waits for 0SEND_F0 on rank 0")));
}

TEST(PpCheck, NamesTheRankActionIndexAndActionOfAViolation) {
  struct Case {
    std::vector<std::vector<Action>> actions;
    const char* expected;
  };
  const Action send_f{ActionType::kSendForward, 0, 0}, recv_f{ActionType::kRecvForward, 1, 0};
  const Action send_b{ActionType::kSendBackward, 1, 0}, recv_b{ActionType::kRecvBackward, 0, 0};
  for (const Case& c : {
           Case{{{{kF, 0, 0}, send_f, recv_b, {kI, 0, 0}, {kF, 0, 0}},
                 {recv_f, {kF, 1, 0}, {kB, 1, 0}, send_b}},
                "rank 0, action 4 (0F0): the forward runs twice"},
           Case{
               {{{kF, 0, 0}, send_f, recv_b, {kW, 0, 0}}, {recv_f, {kF, 1, 0}, {kB, 1, 0}, send_b}},
               "rank 0, action 3 (0W0): expected 0I0 before it"},
           Case{
               {{{kF, 0, 0}, send_f, recv_b, {kB, 0, 0}}, {{kF, 1, 0}, recv_f, {kB, 1, 0}, send_b}},
               "rank 1, action 0 (1F0): expected 1RECV_F0 before it"},
           Case{{{{kF, 1, 0}}, {}}, "rank 0, action 0 (1F0): stage 1 runs on rank 1"},
           Case{{{{kF, 0, 0}, send_f, send_f}, {}}, "rank 0, action 2 (0SEND_F0): sent twice"},
           Case{{{{kF, 0, 7}}, {}}, "rank 0, action 0 (0F7): microbatch out of range"},
           Case{{{{kF, 0, 0}, send_f, recv_b, {kB, 0, 0}}, {recv_f, {kF, 1, 0}, {kB, 1, 0}}},
                "deadlocks: rank 0, action 2 (0RECV_B0) waits for 1SEND_B0 on rank 1"},
           Case{{{{kF, 0, 0}, send_f, {kB, 0, 0}}, {recv_f, {kF, 1, 0}, {kB, 1, 0}, send_b}},
                "rank 0, action 2 (0B0): expected 0RECV_B0 before it"},
           Case{{{{kF, 0, 0}, send_f}, {recv_f, {kF, 1, 0}, {kB, 1, 0}, send_b}},
                "rank 1, action 3 (1SEND_B0): never received by rank 0"},
           Case{{{{kF, 0, 0}, send_f}, {recv_f, {kF, 1, 0}}},
                "rank 0 never runs the backward (B or I) of stage 0, microbatch 0"},
           Case{
               {{{kF, 0, 0}, send_f, recv_b, {kI, 0, 0}}, {recv_f, {kF, 1, 0}, {kB, 1, 0}, send_b}},
               "rank 0 never runs the weight gradient (W) of stage 0, microbatch 0"},
       }) {
    const absl::Status status = Check(Handmade(2, 2, 1, c.actions));
    EXPECT_THAT(status.message(), HasSubstr(c.expected));
  }
  Schedule unlowered = GenerateOrDie("1F1B", 2, 1, 2);
  EXPECT_THAT(Check(unlowered).message(), HasSubstr("lower it"));
  Schedule misshapen = Handmade(2, 2, 1, {{}, {}});
  misshapen.stages = -1;
  EXPECT_THAT(Check(misshapen).message(), HasSubstr("found 2 ranks, -1 stages"));
  misshapen = Handmade(2, 2, 1, {{}, {}});
  misshapen.stage_rank[1] = 5;
  EXPECT_THAT(Check(misshapen).message(),
              HasSubstr("stage 1 is placed on rank 5, expected 0 to 1"));
}

TEST(PpCsv, RoundTripsEverySchedule) {
  for (const std::string& name : ScheduleNames()) {
    const int per_rank = *IsMultiStage(name) ? 2 : 1;
    const Schedule lowered = Lower(GenerateOrDie(name, 4, per_rank, 8));
    const TempFile file(WriteCsv(lowered));
    absl::StatusOr<Schedule> read = ReadCsv(file.path(), 4, 8);
    ASSERT_TRUE(read.ok()) << name << ": " << read.status();
    EXPECT_EQ(read->actions, lowered.actions) << name;
    EXPECT_EQ(read->stage_rank, lowered.stage_rank) << name;
    EXPECT_EQ(read->stages, lowered.stages) << name;
    EXPECT_TRUE(read->lowered);
  }
}

TEST(PpCsv, LowersAComputeOnlyFileAndPlacesStagesWhereTheyRun) {
  const TempFile file(
      "# 1F1B on 2 ranks, compute actions only\n"
      "0F0, 0F1,0B0 ,,0B1\n"
      "\n"
      "1F0,1B0,1F1,1B1\n");
  absl::StatusOr<Schedule> read = ReadCsv(file.path(), 2, 2);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->stage_rank, (std::vector<int>{0, 1}));
  EXPECT_EQ(read->actions, Lower(GenerateOrDie("1F1B", 2, 1, 2)).actions);
}

TEST(PpCsv, RefusesADeadlockingScheduleNamingTheRankAndAction) {
  // Rank 0 waits for 0B0's gradient before sending 0F1, which rank 1 needs first.
  const TempFile file("0F0,0B0,0F1,0B1\n1F0,1F1,1B0,1B1\n");
  absl::StatusOr<Schedule> read = ReadCsv(file.path(), 2, 2);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(),
              AllOf(HasSubstr(file.path()), HasSubstr("deadlock"),
                    HasSubstr("rank 0, action 2 (0RECV_B0) waits for 1SEND_B0 on rank 1"),
                    HasSubstr("rank 1, action 2 (1RECV_F1) waits for 0SEND_F1 on rank 0")));
}

TEST(PpCsv, RefusesMalformedFilesNamingFileLineAndCell) {
  struct Case {
    const char* text;
    const char* expected;
  };
  for (const Case& c : {
           Case{"0F0,0B0\n# comment\n1F0,1X0\n", ":3: cell 2 ('1X0'): action '1X0'"},
           Case{"0F0,,0F9\n1F0\n", ":1: cell 3 ('0F9'): microbatch 9 out of range"},
           Case{"0F0,0B0\n1F0,0B0\n",
                ":2: cell 2 ('0B0'): stage 0 already runs on rank 0 (line 1)"},
           Case{"0F0,0B0\n", ": expected 2 rank lines (the pipeline degree), found 1"},
           Case{"0F0\n1F0\n2F0\n", ":3: expected 2 rank lines (the pipeline degree), found more"},
           Case{"0F0,0B0\n2F0,2B0\n", ": no compute action of stage 1"},
           Case{"0F0,0F1,0B0,0B1\n,\n", ":2: rank 1 runs no stage"},
           Case{"0F0,0B0\n1SEND_F0\n", ":2: rank 1 runs no stage"},
           // Binary bytes are quoted escaped and cut short (issue #39), never raw.
           Case{"\x1b[31m\xff\x01 and forty more bytes of a binary file, cut short",
                ":1: cell 1 ('\\x1b[31m\\xff\\x01 and forty more bytes of a binary...'): action "
                "'\\x1b[31m\\xff\\x01 and forty more bytes of a binary...': no stage number"},
       }) {
    const TempFile file(c.text);
    absl::StatusOr<Schedule> read = ReadCsv(file.path(), 2, 2);
    ASSERT_FALSE(read.ok()) << c.text;
    EXPECT_THAT(read.status().message(), AllOf(HasSubstr(file.path()), HasSubstr(c.expected)));
  }
  EXPECT_THAT(ReadCsv("any.csv", 2, 0).status().message(),
              HasSubstr("expected at least 1 rank and microbatch, found 2 and 0"));
  absl::StatusOr<Schedule> missing = ReadCsv("/nonexistent/schedule.csv", 2, 2);
  EXPECT_THAT(missing.status().message(),
              AllOf(HasSubstr("/nonexistent/schedule.csv"), HasSubstr("cannot open")));
  // A folder is named as one (issue #39), not read as a file of no rank lines.
  const std::string folder = testing::TempDir() + "/pp_csv_folder_" + std::to_string(getpid());
  std::filesystem::create_directories(folder);
  EXPECT_EQ(ReadCsv(folder, 2, 2).status().message(),
            "pipeline schedule CSV '" + folder + "': not a file (a folder?)");
  std::filesystem::remove(folder);
}

// docs/pipeline.md's tables for p = 4 (bubbles per m; peak in flight per rank at m = 8) are what
// the simulation computes.
TEST(PpDocs, PipelineTablesMatchTheSimulation) {
  std::ifstream doc(std::string(TITAN_SOURCE_DIR) + "/docs/pipeline.md");
  ASSERT_TRUE(doc.good());
  enum class Table { kNone, kBubble, kPeak } table = Table::kNone;
  std::vector<int> columns;  // m of each bubble column, the rank of each peak column
  std::map<Table, int> rows;
  std::string line;
  while (std::getline(doc, line)) {
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() < 4) {
      table = Table::kNone;
      continue;
    }
    for (std::string& cell : cells) cell = std::string(absl::StripAsciiWhitespace(cell));
    if (cells[1] == "schedule (p = 4)" || cells[1] == "peak in flight (p = 4, m = 8)") {
      table = cells[1] == "schedule (p = 4)" ? Table::kBubble : Table::kPeak;
      columns.clear();
      for (size_t c = 3; c + 1 < cells.size(); ++c) {
        absl::string_view header = cells[c];
        int value = 0;
        ASSERT_TRUE(absl::ConsumePrefix(&header, "m = ") || absl::ConsumePrefix(&header, "rank "));
        ASSERT_TRUE(absl::SimpleAtoi(header, &value)) << cells[c];
        columns.push_back(value);
      }
      continue;
    }
    if (table == Table::kNone || !PlacementOf(cells[1]).ok()) continue;
    int per_rank = 0;
    ASSERT_TRUE(absl::SimpleAtoi(cells[2], &per_rank)) << line;
    ASSERT_EQ(cells.size(), columns.size() + 4) << line;
    for (size_t c = 0; c < columns.size(); ++c) {
      const std::string expected =
          table == Table::kBubble
              ? absl::StrFormat("%.3f", Bubble(cells[1], 4, per_rank, columns[c]))
              : absl::StrCat(
                    PeakInFlight(Lower(GenerateOrDie(cells[1], 4, per_rank, 8)), columns[c]));
      EXPECT_EQ(cells[3 + c], expected) << line;
    }
    ++rows[table];
  }
  EXPECT_EQ(rows[Table::kBubble], 10);
  EXPECT_EQ(rows[Table::kPeak], 7);
}

}  // namespace
}  // namespace titan::pp
