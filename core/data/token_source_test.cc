#include "core/data/token_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

class TokenSourceTest : public testing::Test {
 protected:
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(absl::string_view name) const { return (dir_ / std::string(name)).string(); }
  fs::path dir_ = fs::path(testing::TempDir()) / absl::StrCat("titan_source_", getpid());
};

// The name of the mapping that holds `address`, from /proc/self/maps: a file's path, a pseudo-name
// such as "[heap]", or empty for an anonymous mapping.
std::string MappedFileAt(const void* address) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  for (std::string line; std::getline(maps, line);) {
    // "start-end perms offset dev inode path"
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    std::vector<std::string> range = absl::StrSplit(fields[0], '-');
    uint64_t start = 0, end = 0;
    if (!absl::SimpleHexAtoi(range[0], &start) || !absl::SimpleHexAtoi(range[1], &end)) continue;
    if (at >= start && at < end) return fields.size() > 5 ? fields[5] : "";
  }
  return "";
}

TEST_F(TokenSourceTest, AFolderIsItsShardsInNameOrderReadInPlace) {
  const std::vector<int32_t> narrow = {0, 1, 65535, 300};
  const std::vector<int32_t> wide = {0, 65536, 128255, 7};
  ASSERT_TRUE(WriteTokenShard(Path("b.tok"), wide).ok());
  ASSERT_TRUE(WriteTokenShard(Path("a.tok"), narrow).ok());
  std::ofstream(Path("notes.txt")) << "not a shard";
  auto source = TokenSource::Open(dir_.string());
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_EQ((*source)->num_shards(), 2);
  EXPECT_EQ((*source)->num_tokens(), 8);
  EXPECT_EQ((*source)->shard_name(0), Path("a.tok"));
  std::vector<int32_t> read(4);
  (*source)->shard(0).Read(0, 4, read.data());
  EXPECT_EQ(read, narrow);
  (*source)->shard(1).Read(0, 4, read.data());
  EXPECT_EQ(read, wide);
  // The tokens are the files' mappings, not a copy on the heap.
  for (int64_t i = 0; i < 2; ++i) {
    EXPECT_EQ(fs::path(MappedFileAt((*source)->shard(i).data())),
              fs::canonical((*source)->shard_name(i)));
  }
  // In-memory streams are shards too, held without a copy either.
  std::vector<int32_t> stream = {4, 5, 6};
  const int32_t* buffer = stream.data();
  std::vector<std::vector<int32_t>> streams;
  streams.push_back(std::move(stream));
  auto memory = TokenSource::FromTokens(std::move(streams));
  EXPECT_EQ(memory->shard(0).data(), buffer);
  EXPECT_EQ(memory->shard(0)[2], 6);
}

TEST_F(TokenSourceTest, CheckVocabularyNamesTheShardAndPosition) {
  ASSERT_TRUE(WriteTokenShard(Path("a.tok"), std::vector<int32_t>{1, 2, 3}).ok());
  ASSERT_TRUE(WriteTokenShard(Path("b.tok"), std::vector<int32_t>{1, 70000, 9}).ok());
  auto source = TokenSource::Open(dir_.string());
  ASSERT_TRUE(source.ok());
  EXPECT_TRUE((*source)->CheckVocabulary(70001, "t.json").ok());
  auto status = (*source)->CheckVocabulary(70000, "t.json");
  EXPECT_NE(status.message().find(Path("b.tok") + ": token 70000 at position 1 is outside the "
                                                  "vocabulary of 70000 of t.json"),
            std::string::npos)
      << status;
  status = (*source)->CheckVocabulary(3, "t.json");
  EXPECT_NE(status.message().find(Path("a.tok") + ": token 3 at position 2"), std::string::npos)
      << status;
  EXPECT_FALSE(TokenSource::FromTokens({{1, -1}})->CheckVocabulary(10, "t").ok());
}

TEST_F(TokenSourceTest, BadShardsAndEmptyFoldersAreErrorsNamingThem) {
  ASSERT_TRUE(WriteTokenShard(Path("t.tok"), std::vector<int32_t>{1, 2, 3, 4, 5}).ok());
  fs::resize_file(Path("t.tok"), fs::file_size(Path("t.tok")) - 2);
  auto source = TokenSource::Open(dir_.string());
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find(Path("t.tok")), std::string::npos);
  fs::create_directories(dir_ / "empty");
  EXPECT_EQ(TokenSource::Open((dir_ / "empty").string()).status().code(),
            absl::StatusCode::kNotFound);
  // A device is named for what it is, not mapped as a shard.
  EXPECT_EQ(TokenSource::Open("/dev/zero").status().message(),
            "\"/dev/zero\" is a character device, not a regular file or folder; expected a token "
            "shard (*.tok) or a folder of them");
}

}  // namespace
}  // namespace titan
