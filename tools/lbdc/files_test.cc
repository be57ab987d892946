// titan-lbdc's input files: JSON and TOML topologies and load traces. Good files give the
// instance they describe; bad ones give errors naming the file and the place.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "core/topology/switch_graph.h"
#include "tools/lbdc/loads.h"

namespace titan::lbdc {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A file of this test process's own, since ctest runs the tests of one binary side by side.
std::string TestFile(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("lbdc_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = TestFile(name);
  std::ofstream(path) << text;
  return path;
}

absl::StatusOr<topology::Topology> Read(const std::string& name, const std::string& text) {
  std::mt19937_64 random(1);
  return topology::MakeTopology(WriteFile(name, text), random);
}

// A path a - b - c with the controller at a, as both formats write it.
constexpr const char* kJson = R"({
  "switches": ["a", "b", "c"],
  "links": [["a", "b"], ["b", "c"]],
  "controllers": ["a"]
})";
constexpr const char* kToml = R"(switches = ["a", "b", "c"]
links = [["a", "b"], ["b", "c"]]
controllers = ["a"]
)";

TEST(LbdcTopologyFile, JsonAndTomlDescribeTheSameInstance) {
  for (const auto& [name, text] : {std::pair{"path.json", kJson}, std::pair{"path.toml", kToml}}) {
    SCOPED_TRACE(name);
    absl::StatusOr<topology::Topology> topology = Read(name, text);
    ASSERT_TRUE(topology.ok()) << topology.status();
    EXPECT_THAT(topology->name, ElementsAre("a", "b", "c"));
    EXPECT_THAT(topology->links, ElementsAre(ElementsAre(1), ElementsAre(0, 2), ElementsAre(1)));
    EXPECT_THAT(topology->controllers_at, ElementsAre("a"));
    std::mt19937_64 random(1);
    absl::StatusOr<std::vector<int32_t>> sites =
        topology::PlaceControllers(*topology, "given", 1, {}, random);
    ASSERT_TRUE(sites.ok()) << sites.status();
    EXPECT_THAT(*sites, ElementsAre(0));
    absl::StatusOr<BalanceProblem> problem =
        topology::PotentialControllers(*topology, *sites, 2, 0);
    ASSERT_TRUE(problem.ok()) << problem.status();
    EXPECT_THAT(problem->potential, ElementsAre(ElementsAre(0), ElementsAre(0), ElementsAre(0)));
    EXPECT_THAT(problem->distance, ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2)));
  }
}

TEST(LbdcTopologyFile, BadFilesNameTheFileAndThePlace) {
  struct Case {
    const char* name;
    const char* text;
    std::vector<std::string> expected;  // substrings of the message
  };
  const std::vector<Case> cases = {
      {"syntax.json", "{\n  \"switches\": [\"a\",\n  ]\n}", {"syntax.json:3:3", "not valid JSON"}},
      {"array.json", "[1, 2]", {"array.json", "expected a JSON object"}},
      {"number.json", R"({"switches": ["a", 7]})", {"number.json", "switches[1]", "a string"}},
      // docs/fuzzing.md, finding 6: a number beyond a double ended titan-lbdc with an exception.
      {"huge.json", R"({"switches": [1e99999]})", {"huge.json", "not valid JSON", "overflow"}},
      {"unknown.json",
       R"({"switches": ["a", "b"], "links": [["a", "b"], ["b", "bb"]]})",
       {"unknown.json", "links[1]", "'bb'", "did you mean 'b'"}},
      {"pair.json",
       R"({"switches": ["a"], "links": [["a"]]})",
       {"pair.json", "links[0]", "pair of switch names"}},
      {"empty.json", R"({"links": []})", {"empty.json", "lists no switch"}},
      // docs/fuzzing.md, finding 2: a links object ended titan-lbdc with an exception.
      {"links.json",
       R"({"switches": ["a"], "links": {"x": 1}})",
       {"links.json", "links: expected an array"}},
      {"links_string.json",
       R"({"switches": ["a"], "links": "a-b"})",
       {"links_string.json", "links: expected an array"}},
      {"links_number.json",
       R"({"switches": ["a"], "links": 3})",
       {"links_number.json", "links: expected an array"}},
      {"links_string.toml",
       "switches = [\"a\"]\nlinks = \"a-b\"\n",
       {"links_string.toml", "links: expected an array"}},
      {"links_table.toml",
       "switches = [\"a\"]\n[links]\nx = 1\n",
       {"links_table.toml", "links: expected an array"}},
      {"links_number.toml",
       "switches = [\"a\"]\nlinks = 3\n",
       {"links_number.toml", "links: expected an array"}},
      {"syntax.toml", "switches = [\"a\"\nlinks = 3\n", {"syntax.toml:2:"}},
      {"twice.toml", "switches = [\"a\", \"a\"]\n", {"twice.toml", "'a' is listed twice"}},
      {"links.toml",
       "switches = [\"a\"]\nlinks = [[\"a\", 1]]\n",
       {"links.toml", "links[0]", "pair of switch names"}},
      // Issue 40: a misspelt key was ignored, leaving a graph without links.
      {"link.json",
       R"({"switches": ["a", "b"], "link": [["a", "b"]]})",
       {"link.json", "unknown key 'link'", "did you mean 'links'"}},
      {"link.toml",
       "switches = [\"a\", \"b\"]\nlink = [[\"a\", \"b\"]]\n",
       {"link.toml", "unknown key 'link'", "did you mean 'links'"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<topology::Topology> topology = Read(c.name, c.text);
    ASSERT_FALSE(topology.ok());
    EXPECT_EQ(topology.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& part : c.expected) {
      EXPECT_THAT(std::string(topology.status().message()), HasSubstr(part));
    }
  }
  std::mt19937_64 random(1);
  absl::StatusOr<topology::Topology> missing =
      topology::MakeTopology("/nonexistent/net.json", random);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/net.json"));
  // A folder is named as one (issue #39), not as "not valid JSON".
  const std::string folder = TestFile("folder.json");
  std::filesystem::create_directories(folder);
  EXPECT_EQ(topology::MakeTopology(folder, random).status().message(),
            folder + ": not a file (a folder?): expected a topology file");
}

absl::StatusOr<std::vector<std::vector<double>>> ReadTrace(const std::string& text, int n) {
  std::mt19937_64 random(1);
  return MakeLoads("trace:" + WriteFile("trace.csv", text), n, 0, 0.3, random);
}

TEST(LbdcTraceFile, EachLineIsASnapshotOfPerSwitchFlowCounts) {
  auto snapshots = ReadTrace("# flows per switch\n1,2,3\n\n 4, 5.5 ,0\n", 3);
  ASSERT_TRUE(snapshots.ok()) << snapshots.status();
  EXPECT_THAT(*snapshots, ElementsAre(ElementsAre(1, 2, 3), ElementsAre(4, 5.5, 0)));
}

TEST(LbdcTraceFile, BadTracesNameTheFileAndTheLine) {
  auto wrong_count = ReadTrace("1,2,3\n4,5\n", 3);
  EXPECT_THAT(wrong_count.status().message(),
              AllOf(HasSubstr("trace.csv:2:"), HasSubstr("2 values"), HasSubstr("(3)")));
  auto negative = ReadTrace("# t0\n1,-2,3\n", 3);
  EXPECT_THAT(negative.status().message(),
              AllOf(HasSubstr("trace.csv:2:"), HasSubstr("'-2'"), HasSubstr("flow count")));
  auto text = ReadTrace("1,2,x\n", 3);
  EXPECT_THAT(text.status().message(), AllOf(HasSubstr("trace.csv:1:"), HasSubstr("'x'")));
  auto empty = ReadTrace("# nothing\n", 3);
  EXPECT_THAT(empty.status().message(), AllOf(HasSubstr("trace.csv"), HasSubstr("no loads")));
  std::mt19937_64 random(1);
  auto missing = MakeLoads("trace:/nonexistent/flows.csv", 3, 0, 0.3, random);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/flows.csv"));
}

}  // namespace
}  // namespace titan::lbdc
