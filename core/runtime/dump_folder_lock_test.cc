#include "core/runtime/dump_folder_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "core/runtime/single_process_comm.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class DumpFolderLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = fs::path(::testing::TempDir()) /
              absl::StrCat("titan_lock_", getpid(), "_",
                           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder_);
  }
  void TearDown() override { fs::remove_all(folder_); }
  std::string LockFileText() const {
    std::ifstream in(folder_ / "titan-run.lock");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  fs::path folder_;
};

TEST_F(DumpFolderLockTest, ASecondHolderIsRefusedNamingTheFirst) {
  absl::StatusOr<DumpFolderLock> first = DumpFolderLock::Acquire(folder_.string());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->stale_holder().empty());
  // A second open file of the same lock conflicts as another process's would.
  absl::StatusOr<DumpFolderLock> second = DumpFolderLock::Acquire(folder_.string());
  ASSERT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("job.dump_folder = \"", folder_.string(),
                                     "\" is in use by another run: pid ", getpid(), " on host ",
                                     host, " (started ")));
  EXPECT_THAT(second.status().message(), HasSubstr((folder_ / "titan-run.lock").string()));
}

TEST_F(DumpFolderLockTest, ReleasedOnDestructionAndThenNotStale) {
  { ASSERT_TRUE(DumpFolderLock::Acquire(folder_.string()).ok()); }
  EXPECT_EQ(LockFileText(), "");  // a clean release leaves no record
  absl::StatusOr<DumpFolderLock> again = DumpFolderLock::Acquire(folder_.string());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->stale_holder().empty());
}

TEST_F(DumpFolderLockTest, TheRecordOfADeadHolderIsNamedAsStale) {
  // What a killed run leaves: its record, with no process holding the lock.
  fs::create_directories(folder_);
  std::ofstream(folder_ / "titan-run.lock")
      << R"({"pid": 4242, "host": "node7", "started": "2026-12-01T10:00:00Z"})"
      << "\n";
  absl::StatusOr<DumpFolderLock> lock = DumpFolderLock::Acquire(folder_.string());
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_EQ(lock->stale_holder(), "pid 4242 on host node7 (started 2026-12-01T10:00:00Z)");
  EXPECT_THAT(LockFileText(), HasSubstr(absl::StrCat("\"pid\":", getpid())));
}

TEST_F(DumpFolderLockTest, AFolderThatCannotBeMadeIsNamed) {
  fs::create_directories(folder_);
  std::ofstream(folder_ / "file") << "x";
  absl::StatusOr<DumpFolderLock> lock = DumpFolderLock::Acquire((folder_ / "file" / "d").string());
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(lock.status().message(),
              HasSubstr(absl::StrCat("job.dump_folder = \"", (folder_ / "file" / "d").string(),
                                     "\": cannot create it")));
}

TEST_F(DumpFolderLockTest, TheJobsLockIsHeldByRankZero) {
  SingleProcessCommunicator world;
  absl::StatusOr<std::optional<DumpFolderLock>> held =
      LockDumpFolderForJob(folder_.string(), world);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(held->has_value());
  absl::StatusOr<std::optional<DumpFolderLock>> refused =
      LockDumpFolderForJob(folder_.string(), world);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace titan
