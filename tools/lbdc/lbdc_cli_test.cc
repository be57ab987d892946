// titan-lbdc end to end: bad inputs give an error naming them (exit 1 or 2, never a crash or a
// hang), and --json holds every policy's assignment as valid JSON.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/shell.h"

namespace {

using ::testing::HasSubstr;

using Result = titan::testing::ShellResult;

// Runs titan-lbdc with `args`, bounded by `timeout` so that a hang fails the test.
Result Lbdc(const std::string& args) {
  return titan::testing::RunShell(std::string("timeout 60 ") + TITAN_LBDC + " --quiet " + args);
}

// This test process's own folder, since ctest runs the tests of one binary side by side.
std::filesystem::path TestDir() {
  return std::filesystem::path(::testing::TempDir()) / ("lbdc_test_" + std::to_string(getpid()));
}

std::string TestFile(const std::string& name) {
  std::filesystem::create_directories(TestDir());
  return (TestDir() / name).string();
}

// Each test process left its folder behind in the temporary directory.
class RemoveTestDir : public ::testing::Environment {
 public:
  void TearDown() override { std::filesystem::remove_all(TestDir()); }
};
::testing::Environment* const kRemoveTestDir =
    ::testing::AddGlobalTestEnvironment(new RemoveTestDir);

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = TestFile(name);
  std::ofstream(path) << text;
  return path;
}

TEST(LbdcCli, BadInputsAreErrorsNamingThem) {
  struct Case {
    std::string args;
    int exit_code;
    std::string message;
  };
  const std::vector<Case> cases = {
      // Issue 23: each of these crashed, hung or was silently accepted.
      {"--set=distributd.threads=4", 1,
       "--set=distributd.threads=4: policy 'distributd' is not run"},
      {"--policies=greedy --set=distributed.threads=4", 1, "policy 'distributed' is not run"},
      {"--policies=ilp --set=ilp.time_limit_s=nan", 1,
       "--set=ilp.time_limit_s=nan: expected a finite float"},
      {"--policies=ilp --set=ilp.time_limit_s=inf", 1, "expected a finite float"},
      {"--topology=leaf-spine:100000,100000", 1, "1e+10 links; at most 5e+07"},
      {"--topology=leaf-spine:1e12,2", 1, "--topology=leaf-spine:1e12,2: expected leaf-spine"},
      {"--topology=leaf-spine:2.5,2", 1, "whole numbers"},
      {"--topology=waxman:100,-0.4", 1, "expected 0 < ALPHA <= 1000"},
      // Issue 40: each of these ran out of memory, took minutes, or was silently ignored.
      {"--topology=waxman:100000,1e300", 1, "expected 0 < ALPHA <= 1000"},
      {"--topology=waxman:100000,0.01", 1,
       "pairs of switches to consider; at most 5e+08 are supported: raise ALPHA or BETA"},
      {"--topology=fat-tree:48 --hops=4 --changes=1000000 --policies=greedy", 1,
       "--changes=1000000: 1000001 load vectors of 2880 switches take"},
      {"--topology --json=x.json", 2, "--topology needs a value (--topology=VALUE)"},
      {"--policies=greedy,greedy", 2, "--policies=greedy,greedy: 'greedy' is named twice"},
      {"--set=foo", 2, "--set=foo: expected POLICY.KEY=VALUE"},
      {"--controllers-at=core-0", 2,
       "--controllers-at places controllers only with --placement=given, not "
       "--placement=k-center"},
      {"--loads=trace:loads.csv --changes=3", 2,
       "--changes=3 draws load changes, but --loads=trace:loads.csv gives every step's loads"},
      {"--topology=waxman:100,0.4,1.5", 1, "expected 0 < BETA <= 1"},
      {"--topology=fat-tree:4 --placement=given --controllers-at=core-0,core-0", 1,
       "controller site 'core-0' is listed twice"},
      {"--rebalance-slack=0.5", 2, "--rebalance-slack=0.5: expected a finite number >= 1"},
      {"--max-moves=-1", 2, "--max-moves=-1: expected an integer"},
      {"--loads=uniform:1,1e308 --changes=3 --drift=0.5", 1, "sum beyond the largest double"},
      {"--hotspot=0.07,5", 2, "--hotspot heats a region from the first load change on"},
      {"--hotspot=0.07 --changes=1", 2, "--hotspot=0.07: expected FRACTION,FACTOR"},
      {"--hotspot=1,5 --changes=1", 2, "0 < FRACTION < 1"},
      {"--hotspot=0.07,1 --changes=1", 2, "a finite FACTOR > 1"},
      {"--hotspot=0.07,inf --changes=1", 2, "a finite FACTOR > 1"},
      {"--hotspot=0.5,1e300 --loads=uniform:1e300,1e300 --changes=1", 1,
       "in the hot region sum beyond the largest double"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Result result = Lbdc(c.args);
    EXPECT_EQ(result.exit_code, c.exit_code) << result.output;
    EXPECT_THAT(result.output, HasSubstr(c.message));
  }
}

TEST(LbdcCli, LoadsWhoseSumOverflowsAreRefusedAndNoJsonIsWritten) {
  // Issue 23: loads of 1e308 gave an infinite maximum, a claim of "optimal" and invalid JSON.
  const std::string topology =
      WriteFile("lbdc_cli_pair.json", R"({"switches": ["a", "b"], "links": [["a", "b"]]})");
  const std::string trace = WriteFile("lbdc_cli_huge.csv", "1e308,1e308\n");
  const std::string json = TestFile("lbdc_cli_huge_out.json");
  std::remove(json.c_str());
  const Result result = Lbdc("--topology=" + topology + " --controllers=1 --loads=trace:" + trace +
                             " --policies=greedy,ilp --json=" + json);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_THAT(result.output,
              HasSubstr("lbdc_cli_huge.csv:1: the flow counts sum beyond the largest double"));
  EXPECT_FALSE(std::ifstream(json).good());
}

TEST(LbdcCli, JsonHoldsEveryPolicysAssignmentAtEveryStep) {
  const std::string json = TestFile("lbdc_cli_assignments.json");
  const Result result = Lbdc(
      "--topology=fat-tree:4 --controllers=3 --hops=4 --changes=2 "
      "--policies=regions,greedy,lst --json=" +
      json);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::ifstream in(json);
  const nlohmann::json document = nlohmann::json::parse(in);  // throws on invalid JSON
  ASSERT_EQ(document["switches"].size(), 20u);
  ASSERT_EQ(document["controllers"].size(), 3u);
  std::map<std::string, int> steps;
  for (const nlohmann::json& row : document["measurements"]) {
    ++steps[row["policy"].get<std::string>()];
    ASSERT_EQ(row["assignment"].size(), 20u);
    for (const nlohmann::json& c : row["assignment"]) {
      EXPECT_GE(c.get<int>(), 0);
      EXPECT_LT(c.get<int>(), 3);
    }
    EXPECT_LE(row["max_load"].get<double>(),
              row["ratio"].get<double>() * row["lower_bound"].get<double>() * (1 + 1e-9));
  }
  EXPECT_EQ(steps, (std::map<std::string, int>{{"regions", 3}, {"greedy", 3}, {"lst", 3}}));
}

// Issue 40: the standard deviation of loads near 1e306 overflowed to inf (null in the JSON) and
// of loads near 1e-300 underflowed to 0. It scales with the loads: 1e306 times that of 1..5.
TEST(LbdcCli, TheLoadsStandardDeviationHoldsAtEveryScale) {
  auto stddev = [](const std::string& loads) {
    const std::string json = TestFile("lbdc_cli_stddev.json");
    const Result result =
        Lbdc("--topology=fat-tree:4 --controllers=3 --hops=4 --policies=greedy --loads=" + loads +
             " --json=" + json);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    std::ifstream in(json);
    const nlohmann::json row = nlohmann::json::parse(in)["measurements"][0];
    EXPECT_TRUE(row["stddev"].is_number()) << row;
    return row["stddev"].is_number() ? row["stddev"].get<double>() : 0.0;
  };
  const double unit = stddev("uniform:1,5");
  ASSERT_GT(unit, 0);
  EXPECT_NEAR(stddev("uniform:1e306,5e306") / 1e306, unit, unit * 1e-9);
  EXPECT_NEAR(stddev("uniform:1e-300,5e-300") / 1e-300, unit, unit * 1e-9);
}

// Issue 40: --fewest-moves-bound reports per change a lower bound on the migrations any
// assignment needs to reach the policy's target: never above what a policy that reached the
// target moved, and not computed for the initial assignment.
TEST(LbdcCli, TheFewestMovesBoundIsBelowWhatPoliciesThatReachTheTargetMoved) {
  const std::string json = TestFile("lbdc_cli_fewest_moves.json");
  const Result result = Lbdc(
      "--topology=waxman:300,0.4,0.6,8 --controllers=30 --hops=10 --max-potential=8 "
      "--changes=4 --policies=greedy,lp-round --fewest-moves-bound --json=" +
      json);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_THAT(result.output, HasSubstr("moves bound"));
  std::ifstream in(json);
  const nlohmann::json document = nlohmann::json::parse(in);
  int compared = 0, positive = 0;
  for (const nlohmann::json& row : document["measurements"]) {
    const int64_t bound = row["fewest_moves_bound"].get<int64_t>();
    if (row["step"].get<int>() == 0) {
      EXPECT_EQ(bound, -1) << row["policy"];
      continue;
    }
    EXPECT_GE(bound, 0) << row["policy"] << " step " << row["step"];
    positive += bound > 0;
    if (row["max_load"].get<double>() <= row["target"].get<double>() * (1 + 1e-9)) {
      EXPECT_LE(bound, row["migrations"].get<int64_t>())
          << row["policy"] << " step " << row["step"];
      ++compared;
    }
  }
  EXPECT_GT(compared, 0);
  EXPECT_GT(positive, 0);
}

}  // namespace
