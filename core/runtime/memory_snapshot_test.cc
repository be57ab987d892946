#include "core/runtime/memory_snapshot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_device.h"
#include "core/tensor/arena.h"

// The out-of-memory test asks for more memory than any machine has, which must fail, not abort.
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

class MemorySnapshotTest : public testing::Test {
 protected:
  void SetUp() override { MemoryTracker::Get().Enable(dir_.string(), 2); }
  void TearDown() override {
    MemoryTracker::Get().Reset();
    fs::remove_all(dir_);
  }
  fs::path dir_ = fs::temp_directory_path() / absl::StrCat("titan_memory_snapshot_test_", getpid());
};

TEST_F(MemorySnapshotTest, ListsEachTensorOfAnArenaAndThePeak) {
  ArenaPlan plan;
  ASSERT_TRUE(plan.Add("wq", {4, 8}).ok());
  ASSERT_TRUE(plan.Add("norm", {8}, DType::kBF16).ok());
  {
    absl::StatusOr<Arena> arena = Arena::Allocate(plan, nullptr, "parameters");
    ASSERT_TRUE(arena.ok()) << arena.status();
    EXPECT_EQ(MemoryTracker::Get().live_bytes(), plan.total_bytes());
    const nlohmann::json snapshot = nlohmann::json::parse(MemoryTracker::Get().SnapshotJson("t"));
    std::map<std::string, nlohmann::json> by_name;
    for (const auto& a : snapshot["allocations"]) by_name[a["name"]] = a;
    ASSERT_EQ(by_name.size(), 2u);
    EXPECT_EQ(by_name["wq"]["bytes"], 4 * 8 * 4);
    EXPECT_EQ(by_name["norm"]["bytes"], 8 * 2);
    EXPECT_EQ(by_name["wq"]["arena"], "parameters");
    EXPECT_EQ(by_name["wq"]["device"], "cpu");
    EXPECT_EQ(snapshot["rank"], 2);
    EXPECT_EQ(snapshot["reason"], "t");
  }
  absl::StatusOr<Tensor> loose = Tensor::Zeros({16});
  ASSERT_TRUE(loose.ok());
  const nlohmann::json after = nlohmann::json::parse(MemoryTracker::Get().SnapshotJson("after"));
  ASSERT_EQ(after["allocations"].size(), 1u);
  EXPECT_EQ(after["allocations"][0]["name"], "tensor");
  EXPECT_EQ(after["allocations"][0]["arena"], "(none)");
  EXPECT_EQ(after["live_bytes"], 16 * 4);
  EXPECT_EQ(after["peak_bytes"], plan.total_bytes());
}

TEST_F(MemorySnapshotTest, AFailedAllocationWritesASnapshot) {
  ArenaPlan plan;
  ASSERT_TRUE(plan.Add("kept", {32}).ok());
  absl::StatusOr<Arena> kept = Arena::Allocate(plan, nullptr, "optimizer_state");
  ASSERT_TRUE(kept.ok());
  const size_t huge = size_t{1} << 62;
  absl::StatusOr<std::shared_ptr<Storage>> failed = Storage::Allocate(huge);
  ASSERT_FALSE(failed.ok());
  const std::string path = (dir_ / "rank2_oom_memory_snapshot.json").string();
  EXPECT_THAT(failed.status().message(), HasSubstr("memory snapshot in " + path));
  std::ifstream in(path);
  const nlohmann::json snapshot = nlohmann::json::parse(in);
  EXPECT_THAT(snapshot["reason"].get<std::string>(),
              HasSubstr(absl::StrCat("allocation of ", huge, " bytes on cpu failed")));
  ASSERT_EQ(snapshot["allocations"].size(), 1u);
  EXPECT_EQ(snapshot["allocations"][0]["name"], "kept");
  EXPECT_EQ(snapshot["allocations"][0]["arena"], "optimizer_state");
}

TEST_F(MemorySnapshotTest, ADeviceBufferCountsOnceAndATensorOnItIsNamed) {
  CpuDevice device;
  absl::StatusOr<void*> buffer = device.Allocate(256);  // as fsdp allocates its shards
  ASSERT_TRUE(buffer.ok());
  absl::StatusOr<std::shared_ptr<Storage>> storage = Storage::Allocate(128, &device);
  ASSERT_TRUE(storage.ok());
  EXPECT_EQ(MemoryTracker::Get().live_bytes(), 256u + 128u);
  const nlohmann::json snapshot = nlohmann::json::parse(MemoryTracker::Get().SnapshotJson("t"));
  std::map<std::string, int64_t> bytes_by_arena;
  for (const auto& a : snapshot["allocations"])
    bytes_by_arena[a["arena"]] += a["bytes"].get<int64_t>();
  EXPECT_EQ(bytes_by_arena, (std::map<std::string, int64_t>{{"(device)", 256}, {"(none)", 128}}));
  ASSERT_TRUE(device.Free(*buffer).ok());
  storage->reset();
  EXPECT_EQ(MemoryTracker::Get().live_bytes(), 0u);
  EXPECT_EQ(MemoryTracker::Get().peak_bytes(), 256u + 128u);
}

TEST(MemoryTrackerOffTest, TracksNothingUntilEnabled) {
  MemoryTracker::Get().Reset();
  absl::StatusOr<Tensor> t = Tensor::Zeros({64});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(MemoryTracker::Get().live_bytes(), 0u);
  EXPECT_EQ(MemoryTracker::Get().OnOutOfMemory(1, "cpu"), "");
}

}  // namespace
}  // namespace titan
