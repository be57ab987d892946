// The attention kernels' tiling arithmetic on the CPU: every tiling fits the shared memory of
// every GPU built for, and the tiles a block visits are exactly those its causal mask needs.
#include "attention_tiles.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <utility>

namespace titan::cuda {
namespace {

constexpr AttentionPass kPasses[] = {AttentionPass::kForward, AttentionPass::kKeyGrad,
                                     AttentionPass::kQueryGrad};

TEST(AttentionTiles, HeadDimsRunInTheSmallestBucketHoldingThem) {
  EXPECT_EQ(HeadDimBucket(1), 64);
  EXPECT_EQ(HeadDimBucket(64), 64);
  EXPECT_EQ(HeadDimBucket(65), 128);
  EXPECT_EQ(HeadDimBucket(128), 128);
  EXPECT_EQ(HeadDimBucket(200), 256);
  EXPECT_EQ(HeadDimBucket(256), 256);
  EXPECT_EQ(HeadDimBucket(257), 0);
}

TEST(AttentionTiles, EveryTilingFitsTheSmallestSharedMemoryAndTheThreads) {
  for (AttentionPass pass : kPasses) {
    for (int bucket : {64, 128, 256}) {
      const AttentionTile tile = TileOf(pass, bucket);
      SCOPED_TRACE(testing::Message() << "pass " << static_cast<int>(pass) << " bucket " << bucket);
      EXPECT_LE(SharedBytesOf(pass, bucket), kAttentionSharedLimit);
      EXPECT_GT(SharedBytesOf(pass, bucket), size_t{48} << 10 >> 1);  // worth a block each
      EXPECT_EQ(tile.queries % kAttentionThreadsPerSide, 0);
      EXPECT_EQ(tile.keys % kAttentionThreadsPerSide, 0);
      EXPECT_EQ(bucket % kAttentionThreadsPerSide, 0);
      // Padded rows are odd, so a column of a tile spreads over the banks.
      EXPECT_EQ(PaddedRow(bucket) % 32, 1);
      EXPECT_EQ(PaddedRow(tile.keys) % 2, 1);
      EXPECT_EQ(PaddedRow(tile.queries) % 2, 1);
    }
  }
  // The forward of head_dim 128 (Llama's): 64 queries, 32 keys, 74,624 bytes.
  EXPECT_EQ(SharedBytesOf(AttentionPass::kForward, 128), size_t{(64 + 64) * 129 + 64 * 33} * 4);
}

TEST(AttentionTiles, VisibleKeysFollowTheCausalMaskAndTheChunkOffsets) {
  const AttentionDims whole{1, 10, 10, 1, 1, 8, 0};
  EXPECT_EQ(VisibleKeys(whole, 0), 1);
  EXPECT_EQ(VisibleKeys(whole, 9), 10);
  const AttentionDims later{1, 4, 6, 1, 1, 8, 3};  // queries at 3.. against keys at 0..5
  EXPECT_EQ(VisibleKeys(later, 0), 4);
  EXPECT_EQ(VisibleKeys(later, 3), 6);
  const AttentionDims earlier{1, 4, 6, 1, 1, 8, -8};  // queries at 0.. against keys at 8..
  EXPECT_EQ(VisibleKeys(earlier, 3), 0);
  EXPECT_EQ(FirstQuerySeeing(earlier, 0), 4);  // none of the 4 does
  EXPECT_EQ(FirstQuerySeeing(later, 5), 2);
  EXPECT_EQ(FirstQuerySeeing(later, 0), 0);
}

// Brute force over many shapes: a query block visits every key tile one of its queries sees and
// no tile none sees; a key block visits every query tile that sees one of its keys, none before.
TEST(AttentionTiles, BlocksVisitExactlyTheTilesTheirMaskNeeds) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const auto below = [&rng](int64_t n) { return static_cast<int64_t>(rng() % n); };
    const int64_t t = 1 + below(150), kv = 1 + below(150), shift = below(300) - 150;
    const int64_t head_dim = 1 + below(256);
    const AttentionDims s{1 + below(2), t, kv, 4, 2, head_dim, shift};
    const int bucket = HeadDimBucket(head_dim);
    for (AttentionPass pass : {AttentionPass::kForward, AttentionPass::kQueryGrad}) {
      const AttentionTile tile = TileOf(pass, bucket);
      for (int64_t i0 = 0; i0 < t; i0 += tile.queries) {
        const int64_t visited = KeyTilesSeenBy(s, i0, tile);
        int64_t needed = 0;  // one past the last key tile any query of the block sees
        for (int64_t i = i0; i < i0 + tile.queries && i < t; ++i) {
          for (int64_t j = 0; j < kv; ++j) {
            if (j <= i + shift) needed = std::max(needed, j / tile.keys + 1);
          }
        }
        ASSERT_EQ(visited, needed) << "t " << t << " kv " << kv << " shift " << shift;
      }
    }
    const AttentionTile tile = TileOf(AttentionPass::kKeyGrad, bucket);
    const int64_t query_tiles = CeilDiv(t, tile.queries);
    for (int64_t j0 = 0; j0 < kv; j0 += tile.keys) {
      int64_t first_needed = query_tiles;
      for (int64_t j = j0; j < j0 + tile.keys && j < kv; ++j) {
        for (int64_t i = 0; i < t; ++i) {
          if (j <= i + shift) first_needed = std::min(first_needed, i / tile.queries);
        }
      }
      ASSERT_EQ(FirstQueryTileSeeing(s, j0, tile), first_needed)
          << "t " << t << " kv " << kv << " shift " << shift;
    }
  }
}

// Blocks map one to one onto (tile, head) pairs, the longest first.
TEST(AttentionTiles, BlocksCoverEveryTileOfEveryHeadOnceLongestFirst) {
  const AttentionDims s{2, 200, 200, 8, 2, 128, 0};
  for (AttentionPass pass : kPasses) {
    std::set<std::pair<int64_t, int64_t>> seen;
    const int64_t blocks = BlocksOf(s, pass), heads = HeadsOf(s, pass);
    EXPECT_EQ(heads, pass == AttentionPass::kKeyGrad ? 4 : 16);
    EXPECT_EQ(blocks, TilesOf(s, pass) * heads);
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t tile = TileOfBlock(s, pass, block);
      ASSERT_GE(tile, 0);
      ASSERT_LT(tile, TilesOf(s, pass));
      EXPECT_TRUE(seen.emplace(tile, block % heads).second);
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), blocks);
    // Block 0 has the most work: the last query tile, or the first key tile.
    EXPECT_EQ(TileOfBlock(s, pass, 0), pass == AttentionPass::kKeyGrad ? 0 : TilesOf(s, pass) - 1);
  }
}

}  // namespace
}  // namespace titan::cuda
