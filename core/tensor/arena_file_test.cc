#include "core/tensor/arena_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/tensor/internal/crc32c.h"
#include "tests/checkpoint/file_size_limit.h"

namespace titan {
namespace {

Arena MakeArena(int64_t second_dim) {
  ArenaPlan plan;
  EXPECT_TRUE(plan.Add("exp_avg", {3, 5}).ok());
  EXPECT_TRUE(plan.Add("exp_avg_sq", {second_dim}).ok());
  return *Arena::Allocate(plan);
}

void Fill(const Arena& arena, float base) {
  for (int i = 0; i < arena.size(); ++i) {
    float* values = arena.at(i).data<float>();
    for (int64_t j = 0; j < arena.at(i).numel(); ++j) values[j] = base + 0.25f * i + 0.5f * j;
  }
}

class ArenaFileTest : public testing::Test {
 protected:
  std::string path_ = std::filesystem::path(testing::TempDir()) /
                      ("titan_arena_" + std::to_string(getpid()) + ".bin");
  void TearDown() override { std::filesystem::remove(path_); }
};

TEST_F(ArenaFileTest, RoundTripRestoresEveryValue) {
  Arena saved = MakeArena(7);
  Fill(saved, 1.0f);
  ASSERT_TRUE(WriteArena(saved, path_).ok());
  Arena restored = MakeArena(7);
  Fill(restored, -9.0f);
  ASSERT_TRUE(ReadArena(path_, restored).ok());
  for (int i = 0; i < saved.size(); ++i) {
    for (int64_t j = 0; j < saved.at(i).numel(); ++j) {
      EXPECT_EQ(restored.at(i).data<float>()[j], saved.at(i).data<float>()[j]);
    }
  }
}

TEST_F(ArenaFileTest, ShapeMismatchNamesTheFileAndTensor) {
  Arena saved = MakeArena(7);
  ASSERT_TRUE(WriteArena(saved, path_).ok());
  Arena other = MakeArena(8);
  Fill(other, 3.0f);
  absl::Status status = ReadArena(path_, other);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find(path_), std::string::npos) << status;
  EXPECT_NE(status.message().find("exp_avg_sq f32 [8], found exp_avg_sq f32 [7]"),
            std::string::npos)
      << status;
  EXPECT_EQ(other.at(0).data<float>()[0], 3.0f);  // untouched on error
}

TEST_F(ArenaFileTest, TruncatedOrForeignFilesAreErrors) {
  Arena saved = MakeArena(7);
  ASSERT_TRUE(WriteArena(saved, path_).ok());
  std::filesystem::resize_file(path_, std::filesystem::file_size(path_) - 4);
  absl::Status truncated = ReadArena(path_, saved);
  EXPECT_NE(truncated.message().find("truncated"), std::string::npos) << truncated;
  std::ofstream(path_) << "not an arena";
  absl::Status foreign = ReadArena(path_, saved);
  EXPECT_NE(foreign.message().find("magic"), std::string::npos) << foreign;
  EXPECT_EQ(ReadArena(path_ + ".missing", saved).code(), absl::StatusCode::kNotFound);
}

TEST(Crc32cTest, MatchesTheStandardCheckValueOnEitherPath) {
  const char text[] = "123456789";
  EXPECT_EQ(internal::ExtendCrc32c(0, text, 9), 0xe3069283u);
  EXPECT_EQ(internal::ExtendCrc32cPortable(0, text, 9), 0xe3069283u);
  // Split anywhere, the value continues.
  EXPECT_EQ(internal::ExtendCrc32c(internal::ExtendCrc32c(0, text, 4), text + 4, 5), 0xe3069283u);
}

TEST_F(ArenaFileTest, FlippedByteIsACorruptFileNamingBothChecksums) {
  Arena saved = MakeArena(7);
  Fill(saved, 1.0f);
  ASSERT_TRUE(WriteArena(saved, path_).ok());
  {
    // One bit of the last value: the shapes and names still read, only the checksum can tell.
    std::fstream file(path_, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(-1, std::ios::end);
    const char last = static_cast<char>(file.peek());
    file.seekp(-1, std::ios::end);
    file.put(static_cast<char>(last ^ 0x01));
  }
  Arena restored = MakeArena(7);
  Fill(restored, -9.0f);
  absl::Status status = ReadArena(path_, restored);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()),
              testing::MatchesRegex(".*titan_arena_.*: checksum mismatch: the header records "
                                    "CRC-32C 0x[0-9a-f]{8}, the tensors read hash to "
                                    "0x[0-9a-f]{8} \\(the file is corrupt\\)"));
  EXPECT_EQ(restored.at(0).data<float>()[0], -9.0f);  // untouched on error
}

TEST_F(ArenaFileTest, VersionOneFilesWithoutAChecksumStillRead) {
  Arena saved = MakeArena(7);
  Fill(saved, 2.0f);
  {
    // Version 1: magic, version, count, then the records, as titan wrote before the checksum.
    std::ofstream out(path_, std::ios::binary);
    auto put = [&](const void* data, size_t size) {
      out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    };
    auto put_u32 = [&](uint32_t value) { put(&value, sizeof(value)); };
    put("TITANARN", 8);
    put_u32(1);
    put_u32(static_cast<uint32_t>(saved.size()));
    for (int i = 0; i < saved.size(); ++i) {
      const Tensor& t = saved.at(i);
      put_u32(static_cast<uint32_t>(saved.name(i).size()));
      put(saved.name(i).data(), saved.name(i).size());
      put_u32(3);
      put("f32", 3);
      put_u32(static_cast<uint32_t>(t.shape().size()));
      for (int64_t d : t.shape()) put(&d, sizeof(d));
      put(t.raw_data(), t.nbytes());
    }
  }
  Arena restored = MakeArena(7);
  ASSERT_TRUE(ReadArena(path_, restored).ok());
  for (int i = 0; i < saved.size(); ++i) {
    EXPECT_EQ(std::memcmp(restored.at(i).raw_data(), saved.at(i).raw_data(), saved.at(i).nbytes()),
              0);
  }
}

TEST_F(ArenaFileTest, WriteThatRunsOutOfSpaceLeavesNoPartialFile) {
  Arena saved = MakeArena(4096);
  absl::Status status;
  {
    checkpoint_testing::FileSizeLimit limit(1024);
    status = WriteArena(saved, path_);
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find(path_ + ".tmp failed (disk full?)"), std::string::npos) << status;
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(ArenaFileTest, UnknownVersionIsRefusedNamingBoth) {
  Arena saved = MakeArena(7);
  ASSERT_TRUE(WriteArena(saved, path_).ok());
  {
    std::fstream file(path_, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(8);
    const uint32_t version = 9;
    file.write(reinterpret_cast<const char*>(&version), sizeof(version));
  }
  absl::Status status = ReadArena(path_, saved);
  EXPECT_NE(status.message().find("version 1 or 2, found 9"), std::string::npos) << status;
}

}  // namespace
}  // namespace titan
