// titan-lbdc's checks of a policy's answer: a move or an assignment outside the potential sets
// is an error naming the switch and the controllers by their names.
#include "tools/lbdc/check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace titan::lbdc {
namespace {

using ::testing::HasSubstr;

// Switches a, b, c; controllers at a (0) and c (1); b may use either, a only 0, c only 1.
struct Instance {
  topology::Topology topology;
  BalanceProblem problem;
  std::vector<int32_t> sites = {0, 2};
  Instance() {
    topology.name = {"a", "b", "c"};
    topology.links = {{1}, {0, 2}, {1}};
    problem = {{1, 1, 1}, {INFINITY, INFINITY}, {{0}, {0, 1}, {1}}, {}};
  }
};

TEST(LbdcCheck, AnAssignmentOutsideThePotentialSetsNamesTheSwitch) {
  Instance i;
  EXPECT_TRUE(CheckAssignment(i.problem, {0, 1, 1}, i.topology, i.sites).ok());
  const absl::Status outside = CheckAssignment(i.problem, {1, 0, 1}, i.topology, i.sites);
  EXPECT_THAT(std::string(outside.message()),
              HasSubstr("switch 'a' is assigned to controller 1 (at 'c'), which is not one of its "
                        "potential controllers: 0 (at 'a')"));
  const absl::Status unknown = CheckAssignment(i.problem, {0, 7, 1}, i.topology, i.sites);
  EXPECT_THAT(std::string(unknown.message()),
              HasSubstr("switch 'b' is assigned to controller 7 (there are 2 controllers)"));
  const absl::Status short_one = CheckAssignment(i.problem, {0, 1}, i.topology, i.sites);
  EXPECT_THAT(std::string(short_one.message()), HasSubstr("2 entries; expected one per switch"));
}

TEST(LbdcCheck, MovesMustNameASwitchAndWhereItIs) {
  Instance i;
  std::vector<int32_t> assignment = {0, 0, 1};
  ASSERT_TRUE(ApplyMoves({{1, 0, 1}}, i.topology, assignment).ok());
  EXPECT_EQ(assignment, (std::vector<int32_t>{0, 1, 1}));
  const absl::Status wrong_from = ApplyMoves({{1, 0, 1}}, i.topology, assignment);
  EXPECT_THAT(std::string(wrong_from.message()),
              HasSubstr("move 0 takes switch 'b' from controller 0, but the switch is on "
                        "controller 1"));
  const absl::Status no_switch = ApplyMoves({{3, 0, 1}}, i.topology, assignment);
  EXPECT_THAT(std::string(no_switch.message()), HasSubstr("move 0 names switch 3; expected 0..2"));
}

// Issue #40: greedy reported 15,938 migrations where 12,078 switches changed controller.
TEST(LbdcCheck, MigrationsCountSwitchesWhoseControllerChanged) {
  Instance i;
  std::vector<int32_t> assignment = {0, 0, 1};
  const std::vector<int32_t> before = assignment;
  // b to 1, back to 0 and to 1 again: three moves, one switch changed.
  const std::vector<Migration> moves = {{1, 0, 1}, {1, 1, 0}, {1, 0, 1}};
  ASSERT_TRUE(ApplyMoves(moves, i.topology, assignment).ok());
  EXPECT_EQ(MigratedSwitches(before, assignment), 1);
  ASSERT_TRUE(ApplyMoves({{1, 1, 0}}, i.topology, assignment).ok());
  EXPECT_EQ(MigratedSwitches(before, assignment), 0);
}

}  // namespace
}  // namespace titan::lbdc
