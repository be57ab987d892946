#include "plugins/parallel/cp/chunks.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace titan::cp {
namespace {

// Rank r of 2 holds chunks r and 3 - r of each sequence of 4 chunks, back to back.
TEST(ChunkLayout, EachRankHoldsAChunkAndItsMirror) {
  std::vector<int32_t> whole(2 * 8);  // two sequences of 8: chunks of 2
  std::iota(whole.begin(), whole.end(), 0);
  const ChunkLayout first{0, 2}, second{1, 2};
  EXPECT_EQ(*first.LocalTokens(whole.data(), 2, 8),
            (std::vector<int32_t>{0, 1, 6, 7, 8, 9, 14, 15}));
  EXPECT_EQ(*second.LocalTokens(whole.data(), 2, 8),
            (std::vector<int32_t>{2, 3, 4, 5, 10, 11, 12, 13}));
  EXPECT_EQ(*first.LocalSeqLen(8), 4);
  const std::vector<TokenRun> runs = second.Positions(4);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].local_start, 0);
  EXPECT_EQ(runs[0].length, 2);
  EXPECT_EQ(runs[0].global_start, 2);
  EXPECT_EQ(runs[1].local_start, 2);
  EXPECT_EQ(runs[1].length, 2);
  EXPECT_EQ(runs[1].global_start, 4);
}

// Every position of the sequence sits on exactly one rank, where Positions says.
TEST(ChunkLayout, TheRanksCoverEachSequenceOnce) {
  constexpr int kDegree = 3;
  constexpr int64_t kSeqLen = 18;
  std::vector<int32_t> whole(kSeqLen);
  std::iota(whole.begin(), whole.end(), 0);
  std::vector<int> seen(kSeqLen, 0);
  for (int r = 0; r < kDegree; ++r) {
    const ChunkLayout layout{r, kDegree};
    const std::vector<int32_t> local = *layout.LocalTokens(whole.data(), 1, kSeqLen);
    for (const TokenRun& run : layout.Positions(*layout.LocalSeqLen(kSeqLen))) {
      for (int64_t i = 0; i < run.length; ++i) {
        EXPECT_EQ(local[run.local_start + i], run.global_start + i);  // the token there
        ++seen[run.global_start + i];
      }
    }
  }
  EXPECT_EQ(seen, std::vector<int>(kSeqLen, 1));
}

TEST(ChunkLayout, RefusesASequenceThatDoesNotSplitIntoChunks) {
  const ChunkLayout layout{0, 2};
  const absl::StatusOr<int64_t> local = layout.LocalSeqLen(6);
  ASSERT_FALSE(local.ok());
  EXPECT_NE(local.status().message().find("seq_len must be divisible by 4, found 6"),
            std::string::npos)
      << local.status();
  const std::vector<int32_t> tokens(6);
  EXPECT_FALSE(layout.LocalTokens(tokens.data(), 1, 6).ok());
}

}  // namespace
}  // namespace titan::cp
