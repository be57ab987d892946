#include "core/fault_tolerance/gloo_group.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <vector>

namespace titan {
namespace {

TEST(GlooGroupTest, ThreeMembersSumThroughTheFileStore) {
  const std::string store = (std::filesystem::path(testing::TempDir()) / "gloo_sum").string();
  std::filesystem::remove_all(store);
  std::unique_ptr<QuorumStore> files = FileQuorumStore(store);
  std::vector<std::future<std::vector<float>>> members;
  for (int rank = 0; rank < 3; ++rank) {
    members.push_back(std::async(std::launch::async, [&, rank] {
      auto group = GlooGroup::Connect(*files, "test", rank, 3, std::chrono::seconds(120));
      std::vector<float> values = {1.0f * rank, 10.0f, -2.0f * rank};
      if (!group.ok()) {
        ADD_FAILURE() << group.status();
        return values;
      }
      EXPECT_TRUE((*group)->AllReduceSum(values).ok());
      return values;
    }));
  }
  for (auto& member : members) EXPECT_EQ(member.get(), (std::vector<float>{3.0f, 30.0f, -6.0f}));
}

TEST(GlooGroupTest, APeerThatNeverComesIsATimeoutNamingTheStore) {
  const std::string store = (std::filesystem::path(testing::TempDir()) / "gloo_alone").string();
  std::filesystem::remove_all(store);
  auto group =
      GlooGroup::Connect(*FileQuorumStore(store), "alone", 0, 2, std::chrono::milliseconds(500));
  ASSERT_FALSE(group.ok());
  EXPECT_NE(group.status().message().find(store), std::string::npos) << group.status();
}

}  // namespace
}  // namespace titan
