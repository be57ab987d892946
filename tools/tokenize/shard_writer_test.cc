#include "tools/tokenize/shard_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "core/data/packed_loader.h"
#include "core/data/token_shard.h"
#include "core/data/token_source.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

TEST(WriteShards, PacksDocumentsInOrderWhateverTheThreadCount) {
  const fs::path dir = fs::path(testing::TempDir()) / absl::StrCat("titan_tokenize_", getpid());
  fs::create_directories(dir);
  std::vector<std::string> docs;
  std::ofstream corpus(dir / "corpus.txt");
  for (int i = 0; i < 23; ++i) {
    // The reader keeps each document's line ends.
    docs.push_back(absl::StrCat("document ", i, std::string(i % 5, '!'), "\n"));
    corpus << docs.back() << "%\n";
  }
  corpus.close();
  auto tokenizer = LoadTokenizer("byte");
  ASSERT_TRUE(tokenizer.ok());
  std::vector<int32_t> expected;
  for (const std::string& doc : docs) {
    PackDocument((*tokenizer)->Encode(doc), (*tokenizer)->bos_id(), (*tokenizer)->eos_id(),
                 expected);
  }
  DocumentOptions documents;
  documents.text_separator = "%";
  for (int threads : {1, 3}) {
    SCOPED_TRACE(threads);
    ShardOptions options;
    options.output = (dir / absl::StrCat("out", threads)).string();
    options.threads = threads;
    options.shard_tokens = 40;
    options.block_documents = 4;
    int progress_calls = 0;
    auto report = WriteShards((dir / "corpus.txt").string(), documents, **tokenizer, options,
                              [&](const ShardReport&) { ++progress_calls; });
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->documents, 23);
    EXPECT_EQ(report->tokens, static_cast<int64_t>(expected.size()));
    EXPECT_GT(report->shards, 2);
    EXPECT_GE(progress_calls, 6);
    auto source = TokenSource::Open(options.output);
    ASSERT_TRUE(source.ok()) << source.status();
    EXPECT_EQ((*source)->num_shards(), report->shards);
    std::vector<int32_t> stream;
    for (int64_t i = 0; i < (*source)->num_shards(); ++i) {
      const TokenSpan& shard = (*source)->shard(i);
      stream.resize(stream.size() + shard.size());
      shard.Read(0, shard.size(), stream.data() + stream.size() - shard.size());
    }
    EXPECT_EQ(stream, expected);
  }
  auto missing = WriteShards((dir / "nothing").string(), documents, **tokenizer,
                             ShardOptions{(dir / "out").string()}, nullptr);
  EXPECT_FALSE(missing.ok());
  fs::remove_all(dir);
}

// Corrupt input stops the tool without leaving an empty or partial output behind: a folder it
// made is removed, and in a folder that was there the shards it wrote are.
TEST(WriteShards, CorruptInputLeavesNoOutputBehind) {
  const fs::path dir =
      fs::path(testing::TempDir()) / absl::StrCat("titan_tokenize_corrupt_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir / "corpus");
  // Two files read in order: a good one that fills shards, then a corrupt one.
  {
    std::ofstream good(dir / "corpus" / "a.txt");
    for (int i = 0; i < 50; ++i) good << "document " << i << "\n%\n";
  }
  std::ofstream(dir / "corpus" / "b.jsonl.zst") << "not a zstd stream";
  auto tokenizer = LoadTokenizer("byte");
  ASSERT_TRUE(tokenizer.ok());
  DocumentOptions documents;
  documents.text_separator = "%";
  ShardOptions options;
  options.shard_tokens = 16;  // a shard every document or two, so some are written first
  options.block_documents = 1;
  options.output = (dir / "made").string();
  auto made = WriteShards((dir / "corpus").string(), documents, **tokenizer, options, nullptr);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("b.jsonl.zst: corrupt zstd data"), std::string::npos)
      << made.status();
  EXPECT_FALSE(fs::exists(dir / "made"));

  fs::create_directories(dir / "there");
  std::ofstream(dir / "there" / "notes.txt") << "mine";
  options.output = (dir / "there").string();
  ASSERT_FALSE(
      WriteShards((dir / "corpus").string(), documents, **tokenizer, options, nullptr).ok());
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir / "there"))
    left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"notes.txt"});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace titan
