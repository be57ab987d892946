#include "core/train/training_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/data/token_shard.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSeqLen = 7;

class TrainingDataTest : public testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_);
    std::ofstream corpus(Path("corpus.txt"));
    for (int i = 0; i < 40; ++i) corpus << "fortune number " << i << " says hello\n%\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(absl::string_view name) const { return (dir_ / std::string(name)).string(); }

  // Training on corpus.txt, fortunes separated by "%" lines, with the byte tokenizer.
  TrainingDataOptions Fortunes() const {
    TrainingDataOptions options;
    options.dataset_path = Path("corpus.txt");
    options.documents.text_separator = "%";
    options.tokenizer_path = "byte";
    options.dump_folder = Path("dump");
    options.bpe_vocab_size = 1792;
    options.validation_split = 0.05;
    options.seq_len = kSeqLen;
    return options;
  }
  // Pre-tokenized shards at `path`, made with the byte tokenizer.
  TrainingDataOptions Shards(const std::string& path) const {
    TrainingDataOptions options = Fortunes();
    options.pretokenized = true;
    options.dataset_path = path;
    return options;
  }
  static TrainingDataOptions Batch(TrainingDataOptions options, int64_t batch) {
    options.local_batch_size = batch;
    return options;
  }

  fs::path dir_ = fs::path(testing::TempDir()) / absl::StrCat("titan_training_data_", getpid());
};

// The first token of each row of the next microbatch: in one stream, a window's identity.
std::vector<int32_t> Firsts(PackedLoader& loader, int64_t batch) {
  std::vector<int32_t> tokens(batch * kSeqLen), targets(batch * kSeqLen);
  loader.Next(tokens.data(), targets.data());
  std::vector<int32_t> firsts;
  for (int64_t b = 0; b < batch; ++b) firsts.push_back(tokens[b * kSeqLen]);
  return firsts;
}

TEST_F(TrainingDataTest, HeldOutWindowsNeverAppearInTraining) {
  // A shard whose tokens are their positions: a row's first token names its window.
  std::vector<int32_t> tokens(400);
  std::iota(tokens.begin(), tokens.end(), 0);
  ASSERT_TRUE(WriteTokenShard(Path("positions.tok"), tokens).ok());
  TrainingDataOptions shards = Batch(Shards(Path("positions.tok")), 2);
  TrainingDataOptions validated = shards;
  validated.validation_split = 0.2;
  validated.validation = true;
  auto data = LoadTrainingData(validated, 0, 1);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_TRUE(data->eval.has_value());
  EXPECT_EQ(data->train.num_windows(), 40);
  EXPECT_EQ(data->eval->num_windows(), 10);
  std::set<int32_t> trained, evaluated;
  for (int i = 0; i < 20; ++i) {
    for (int32_t first : Firsts(data->train, 2)) trained.insert(first);
  }
  for (int i = 0; i < 5; ++i) {
    for (int32_t first : Firsts(*data->eval, 2)) evaluated.insert(first);
  }
  EXPECT_EQ(trained.size(), 40u);
  EXPECT_EQ(evaluated.size(), 10u);
  EXPECT_LT(*trained.rbegin(), *evaluated.begin()) << "validation is the tail, never trained on";

  auto without = LoadTrainingData(shards, 0, 1);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_FALSE(without->eval.has_value());
  EXPECT_EQ(without->train.num_windows(), 50);
}

TEST_F(TrainingDataTest, RanksGetSlicesOfTheGlobalBatch) {
  auto single = LoadTrainingData(Batch(Fortunes(), 4), 0, 1);
  auto rank0 = LoadTrainingData(Batch(Fortunes(), 2), 0, 2);
  auto rank1 = LoadTrainingData(Batch(Fortunes(), 2), 1, 2);
  ASSERT_TRUE(single.ok() && rank0.ok() && rank1.ok());
  for (int step = 0; step < 5; ++step) {
    const std::vector<int32_t> global = Firsts(single->train, 4);
    EXPECT_EQ(Firsts(rank0->train, 2), std::vector<int32_t>(global.begin(), global.begin() + 2));
    EXPECT_EQ(Firsts(rank1->train, 2), std::vector<int32_t>(global.begin() + 2, global.end()));
  }
}

TEST_F(TrainingDataTest, OnlyRankZeroWritesTheLearnedVocabulary) {
  TrainingDataOptions learned = Batch(Fortunes(), 2);
  learned.tokenizer_path = "";
  learned.bpe_vocab_size = 280;
  auto rank1 = LoadTrainingData(learned, 1, 2);
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_FALSE(fs::exists(Path("dump/tokenizer.tiktoken")));
  auto rank0 = LoadTrainingData(learned, 0, 2);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  EXPECT_TRUE(fs::exists(Path("dump/tokenizer.tiktoken")));
  // Both learned the same vocabulary.
  const std::string text = "fortune number 12 says hello";
  EXPECT_EQ(rank0->tokenizer->Encode(text), rank1->tokenizer->Encode(text));
  EXPECT_LT(rank0->tokenizer->Encode(text).size(), text.size());
}

TEST_F(TrainingDataTest, ShardsAreCheckedAgainstTheTokenizer) {
  fs::create_directories(dir_ / "shards");
  std::vector<int32_t> tokens(100, 65);
  ASSERT_TRUE(WriteTokenShard(Path("shards/a.tok"), tokens).ok());
  tokens[50] = 600;  // the byte tokenizer has 512 ids
  ASSERT_TRUE(WriteTokenShard(Path("shards/b.tok"), tokens).ok());
  const TrainingDataOptions shards = Batch(Shards(Path("shards")), 2);
  auto data = LoadTrainingData(shards, 0, 1);
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find(Path("shards/b.tok") + ": token 600 at position 50"),
            std::string::npos)
      << data.status();
  fs::remove(Path("shards/b.tok"));
  data = LoadTrainingData(shards, 0, 1);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train.num_windows(), 100 / (kSeqLen + 1));
}

}  // namespace
}  // namespace titan
