#include "core/data/token_shard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

class TokenShardTest : public testing::Test {
 protected:
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(absl::string_view name) const { return (dir_ / std::string(name)).string(); }
  fs::path dir_ = fs::path(testing::TempDir()) / absl::StrCat("titan_shards_", getpid());
};

TEST_F(TokenShardTest, RoundTripsNarrowAndWideTokens) {
  const std::vector<int32_t> narrow = {0, 1, 65535, 300};
  const std::vector<int32_t> wide = {0, 65536, 128255, 7};
  ASSERT_TRUE(WriteTokenShard(Path("a.tok"), narrow).ok());
  ASSERT_TRUE(WriteTokenShard(Path("b.tok"), wide).ok());
  auto a = TokenShard::Open(Path("a.tok"));
  auto b = TokenShard::Open(Path("b.tok"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens().width(), 2);
  EXPECT_EQ(b->tokens().width(), 4);
  EXPECT_EQ(fs::file_size(Path("a.tok")), 24u + 4 * 2);
  for (size_t i = 0; i < narrow.size(); ++i) EXPECT_EQ(a->tokens()[i], narrow[i]);
  for (size_t i = 0; i < wide.size(); ++i) EXPECT_EQ(b->tokens()[i], wide[i]);
  std::vector<int32_t> middle(2);
  b->tokens().Read(1, 2, middle.data());
  EXPECT_EQ(middle, (std::vector<int32_t>{65536, 128255}));
  // A moved shard keeps its mapping, so spans taken before the move stay valid.
  const void* data = a->tokens().data();
  TokenShard moved = std::move(*a);
  EXPECT_EQ(moved.tokens().data(), data);
  EXPECT_EQ(moved.tokens()[2], 65535);
}

TEST(TokenSpan, FindOutsideFindsTheFirstTokenOutsideTheVocabulary) {
  std::vector<int32_t> tokens(200000, 5);
  tokens[150001] = 9;
  tokens[170000] = -3;
  const TokenSpan span(tokens);
  EXPECT_EQ(span.FindOutside(10), 170000);
  EXPECT_EQ(span.FindOutside(9), 150001);
  const std::vector<uint16_t> narrow = {1, 65535, 2};
  EXPECT_EQ(TokenSpan(narrow.data(), 3, 2).FindOutside(65535), 1);
  EXPECT_EQ(TokenSpan(narrow.data(), 3, 2).FindOutside(65536), -1);
}

TEST_F(TokenShardTest, TruncatedShardIsAnErrorNamingTheFile) {
  ASSERT_TRUE(WriteTokenShard(Path("t.tok"), std::vector<int32_t>{1, 2, 3, 4, 5}).ok());
  fs::resize_file(Path("t.tok"), fs::file_size(Path("t.tok")) - 2);
  auto shard = TokenShard::Open(Path("t.tok"));
  ASSERT_FALSE(shard.ok());
  EXPECT_EQ(shard.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(shard.status().message().find(Path("t.tok")), std::string::npos);
  EXPECT_NE(shard.status().message().find("announces 5 tokens of 2 bytes, but the file holds 8"),
            std::string::npos)
      << shard.status();
}

TEST_F(TokenShardTest, CorruptHeadersAreErrors) {
  std::ofstream(Path("short.tok")) << "TITANTOK";
  EXPECT_NE(TokenShard::Open(Path("short.tok")).status().message().find("24-byte header"),
            std::string::npos);
  std::ofstream(Path("foreign.tok")) << std::string(40, 'x');
  EXPECT_NE(TokenShard::Open(Path("foreign.tok")).status().message().find("magic"),
            std::string::npos);
  ASSERT_TRUE(WriteTokenShard(Path("w.tok"), std::vector<int32_t>{1, 2}).ok());
  {
    std::fstream f(Path("w.tok"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(12);
    const uint32_t three = 3;
    f.write(reinterpret_cast<const char*>(&three), 4);
  }
  EXPECT_NE(TokenShard::Open(Path("w.tok")).status().message().find("width of 2 or 4 bytes"),
            std::string::npos);
  EXPECT_EQ(TokenShard::Open(Path("missing.tok")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(WriteTokenShard(Path("neg.tok"), std::vector<int32_t>{-1}).ok());
}

}  // namespace
}  // namespace titan
