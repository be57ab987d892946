#include "core/data/packed_loader.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

namespace titan {
namespace {

constexpr int64_t kSeqLen = 4;

std::vector<int32_t> Stream(int64_t windows) {
  std::vector<int32_t> stream(windows * (kSeqLen + 1) + 2);
  std::iota(stream.begin(), stream.end(), 0);
  return stream;
}

// The window a microbatch row came from (tokens are stream positions).
std::vector<int64_t> Rows(PackedLoader& loader, int64_t batch) {
  std::vector<int32_t> tokens(batch * kSeqLen), targets(batch * kSeqLen);
  loader.Next(tokens.data(), targets.data());
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batch; ++b) {
    EXPECT_EQ(targets[b * kSeqLen], tokens[b * kSeqLen] + 1);  // next-token targets
    EXPECT_EQ(tokens[b * kSeqLen] % (kSeqLen + 1), 0);
    rows.push_back(tokens[b * kSeqLen] / (kSeqLen + 1));
  }
  return rows;
}

TEST(PackDocument, BosDocumentEos) {
  std::vector<int32_t> stream;
  PackDocument(std::vector<int32_t>{5, 6}, 1, 2, stream);
  PackDocument(std::vector<int32_t>{7}, 1, 2, stream);
  EXPECT_EQ(stream, (std::vector<int32_t>{1, 5, 6, 2, 1, 7, 2}));
}

TEST(PackedLoader, DataParallelRanksCoverEachEpochWithoutOverlapOrGap) {
  const int64_t batch = 2, windows = 12;
  const int dp = 3;
  std::vector<PackedLoader> loaders;
  for (int r = 0; r < dp; ++r)
    loaders.push_back(*PackedLoader::Create(Stream(windows), kSeqLen, batch, 7, r, dp));
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::multiset<int64_t> seen;
    for (int step = 0; step < windows / (batch * dp); ++step) {
      for (auto& loader : loaders) {
        for (int64_t w : Rows(loader, batch)) seen.insert(w);
      }
    }
    std::multiset<int64_t> all;
    for (int64_t w = 0; w < windows; ++w) all.insert(w);
    EXPECT_EQ(seen, all) << "epoch " << epoch;
  }
}

TEST(PackedLoader, OrderIsAFunctionOfTheSeedAndStateRestoresExactly) {
  auto a = *PackedLoader::Create(Stream(10), kSeqLen, 2, 1, 0, 1);
  auto b = *PackedLoader::Create(Stream(10), kSeqLen, 2, 1, 0, 1);
  auto c = *PackedLoader::Create(Stream(10), kSeqLen, 2, 2, 0, 1);
  std::vector<int64_t> first_a, first_c;
  for (int i = 0; i < 3; ++i) {
    auto rows = Rows(a, 2);
    EXPECT_EQ(rows, Rows(b, 2));
    first_a.insert(first_a.end(), rows.begin(), rows.end());
    auto rows_c = Rows(c, 2);
    first_c.insert(first_c.end(), rows_c.begin(), rows_c.end());
  }
  EXPECT_NE(first_a, first_c);
  LoaderState saved = a.state();
  EXPECT_EQ(saved.offset, 6);
  std::vector<std::vector<int64_t>> expected;
  for (int i = 0; i < 5; ++i) expected.push_back(Rows(a, 2));  // crosses into epoch 1
  EXPECT_EQ(a.state().epoch, 1);
  auto resumed = *PackedLoader::Create(Stream(10), kSeqLen, 2, 1, 0, 1);
  ASSERT_TRUE(resumed.Restore(saved).ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Rows(resumed, 2), expected[i]);
  EXPECT_FALSE(resumed.Restore({0, 99, 0}).ok());
}

TEST(PackedLoader, TooLittleDataIsAnError) {
  auto loader = PackedLoader::Create(Stream(3), kSeqLen, 2, 0, 0, 2);
  ASSERT_FALSE(loader.ok());
  EXPECT_NE(std::string(loader.status().message()).find("one step needs 4"), std::string::npos);
}

}  // namespace
}  // namespace titan
