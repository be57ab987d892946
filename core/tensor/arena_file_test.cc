#include "core/tensor/arena_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

}  // namespace
}  // namespace titan
