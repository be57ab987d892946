#include "core/runtime/profiler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

class ProfilerTest : public testing::Test {
 protected:
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_ = fs::temp_directory_path() / absl::StrCat("titan_profiler_test_", getpid());
};

TEST_F(ProfilerTest, RecordsOnlyTheStepsToProfile) {
  Profiler profiler(2, dir_.string(), 0);
  EXPECT_FALSE(profiler.BeginStep(1));
  EXPECT_EQ(Profiler::Recording(), nullptr);
  { ScopedSpan span("kernel", "not_recorded"); }
  absl::StatusOr<std::string> none = profiler.EndStep(1);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");
  EXPECT_FALSE(fs::exists(dir_));

  ASSERT_TRUE(profiler.BeginStep(2));
  EXPECT_EQ(Profiler::Recording(), &profiler);
  { ScopedSpan span("kernel", "recorded"); }
  absl::StatusOr<std::string> path = profiler.EndStep(2);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, (dir_ / "iteration_2" / "rank0_trace.json").string());
  EXPECT_EQ(Profiler::Recording(), nullptr);
  const nlohmann::json trace = ReadJson(*path);
  std::vector<std::string> names;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") names.push_back(e["name"]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"recorded", "step 2"}));
}

TEST_F(ProfilerTest, SpansNestOnTheirThreadsTrack) {
  Profiler profiler(1, dir_.string(), 3);
  profiler.set_rank(5);
  ASSERT_TRUE(profiler.BeginStep(7));
  {
    ScopedSpan outer("module", "layers.0", ".forward");
    { ScopedSpan inner("kernel", "gemm"); }
    const int value = Traced("optimizer", "optimizer.step", [] { return 42; });
    EXPECT_EQ(value, 42);
    std::thread comm([&] {
      NameThisThread("comm");
      const int64_t start = NowMicros();  // one reading: the span lasts exactly 5 us
      profiler.Span("all-reduce", "collective", start, start + 5,
                    R"({"bytes": 64, "peers": [0, 1]})");
    });
    comm.join();
  }
  absl::StatusOr<std::string> path = profiler.EndStep(7);
  ASSERT_TRUE(path.ok()) << path.status();
  const nlohmann::json trace = ReadJson(*path);
  std::map<std::string, nlohmann::json> spans;
  std::map<int, std::string> threads;
  for (const auto& e : trace["traceEvents"]) {
    EXPECT_EQ(e["pid"], 5);
    if (e["ph"] == "X") spans[e["name"]] = e;
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[e["tid"]] = e["args"]["name"];
  }
  ASSERT_EQ(spans.size(), 5u);
  const nlohmann::json& step = spans["step 7"];
  const nlohmann::json& outer = spans["layers.0.forward"];
  auto inside = [](const nlohmann::json& child, const nlohmann::json& parent) {
    return child["ts"] >= parent["ts"] &&
           child["ts"].get<int64_t>() + child["dur"].get<int64_t>() <=
               parent["ts"].get<int64_t>() + parent["dur"].get<int64_t>();
  };
  EXPECT_TRUE(inside(outer, step));
  EXPECT_TRUE(inside(spans["gemm"], outer));
  EXPECT_TRUE(inside(spans["optimizer.step"], outer));
  EXPECT_EQ(outer["cat"], "module");
  EXPECT_EQ(outer["tid"], step["tid"]);
  const nlohmann::json& reduce = spans["all-reduce"];
  EXPECT_NE(reduce["tid"], step["tid"]);
  EXPECT_EQ(reduce["dur"], 5);
  EXPECT_EQ(reduce["args"]["bytes"], 64);
  EXPECT_EQ(reduce["args"]["peers"], nlohmann::json({0, 1}));
  EXPECT_EQ(threads[step["tid"]], "main");
  EXPECT_EQ(threads[reduce["tid"]], "comm");
}

}  // namespace
}  // namespace titan
