#include "core/data/packed_loader.h"

#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"

namespace titan {
namespace {

constexpr int64_t kSeqLen = 4;
constexpr int32_t kShardStride = 100000;  // token = shard * kShardStride + position in the shard

// In-memory shards of the given token counts, whose tokens say where they are.
std::shared_ptr<const TokenSource> Shards(std::vector<int64_t> sizes) {
  std::vector<std::vector<int32_t>> shards;
  for (size_t s = 0; s < sizes.size(); ++s) {
    shards.emplace_back(sizes[s]);
    std::iota(shards.back().begin(), shards.back().end(), static_cast<int32_t>(s) * kShardStride);
  }
  return TokenSource::FromTokens(std::move(shards));
}

LoaderOptions Options(int64_t batch, uint64_t seed = 7, int rank = 0, int degree = 1) {
  LoaderOptions options;
  options.seq_len = kSeqLen, options.batch = batch, options.seed = seed;
  options.dp_rank = rank, options.dp_degree = degree;
  return options;
}

struct Window {
  int64_t shard, index;
  auto operator<=>(const Window&) const = default;
};

// The windows of one microbatch; checks that each row is one contiguous run of one shard and
// that the targets are the next tokens.
std::vector<Window> Rows(PackedLoader& loader, int64_t batch) {
  std::vector<int32_t> tokens(batch * kSeqLen), targets(batch * kSeqLen);
  loader.Next(tokens.data(), targets.data());
  std::vector<Window> rows;
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t first = tokens[b * kSeqLen];
    for (int64_t t = 0; t < kSeqLen; ++t) {
      EXPECT_EQ(tokens[b * kSeqLen + t], first + t);
      EXPECT_EQ(targets[b * kSeqLen + t], first + t + 1);
    }
    EXPECT_EQ(first % kShardStride % (kSeqLen + 1), 0) << "a window starts on a window boundary";
    rows.push_back({first / kShardStride, first % kShardStride / (kSeqLen + 1)});
  }
  return rows;
}

std::multiset<Window> AllWindows(const std::vector<int64_t>& sizes) {
  std::multiset<Window> all;
  for (size_t s = 0; s < sizes.size(); ++s) {
    for (int64_t w = 0; w < sizes[s] / (kSeqLen + 1); ++w) all.insert({int64_t(s), w});
  }
  return all;
}

TEST(PackDocument, BosDocumentEos) {
  std::vector<int32_t> stream;
  PackDocument(std::vector<int32_t>{5, 6}, 1, 2, stream);
  PackDocument(std::vector<int32_t>{7}, 1, 2, stream);
  EXPECT_EQ(stream, (std::vector<int32_t>{1, 5, 6, 2, 1, 7, 2}));
}

// Shards of 5, 3 and 4 windows plus tails too short for one more: 12 windows.
const std::vector<int64_t> kWindows = {5, 3, 4};
const std::vector<int64_t> kSizes = {5 * (kSeqLen + 1) + 2, 3 * (kSeqLen + 1),
                                     4 * (kSeqLen + 1) + 4};

TEST(PackedLoader, EachEpochServesEveryWindowOnceWithinItsShard) {
  auto loader = *PackedLoader::Create(Shards(kSizes), Options(3));
  EXPECT_EQ(loader.num_windows(), 12);
  std::vector<std::vector<Window>> epochs(2);
  for (auto& epoch : epochs) {
    for (int step = 0; step < 4; ++step) {
      for (Window w : Rows(loader, 3)) epoch.push_back(w);
    }
    EXPECT_EQ(std::multiset<Window>(epoch.begin(), epoch.end()), AllWindows(kSizes));
    // Shard by shard: once a shard is left it does not come back within the epoch.
    std::set<int64_t> left;
    for (size_t i = 1; i < epoch.size(); ++i) {
      if (epoch[i].shard != epoch[i - 1].shard) left.insert(epoch[i - 1].shard);
      EXPECT_FALSE(left.contains(epoch[i].shard)) << i;
    }
  }
  EXPECT_EQ(loader.state().epoch, 1);
  EXPECT_NE(epochs[0], epochs[1]) << "each epoch has its own order";
}

TEST(PackedLoader, StateNamesTheShardBeingReadAndAdvancesAcrossShards) {
  auto loader = *PackedLoader::Create(Shards(kSizes), Options(1));
  std::vector<LoaderState> states;
  for (int step = 0; step < 12; ++step) {
    const Window w = Rows(loader, 1)[0];
    const LoaderState& state = loader.state();
    states.push_back(state);
    // After serving a window the state names that window's shard, or (its last one served)
    // the next shard with nothing of it served yet.
    if (state.offset > 0) {
      EXPECT_EQ(state.shard, w.shard) << step;
    } else {
      EXPECT_NE(state.shard, w.shard) << step;
    }
  }
  std::set<int64_t> shards;
  for (const LoaderState& s : states) shards.insert(s.shard);
  EXPECT_EQ(shards, (std::set<int64_t>{0, 1, 2}));
  EXPECT_EQ(states.back().epoch, 0);
  EXPECT_EQ(states.back().offset, kWindows[states.back().shard])
      << "the end of an epoch: the last shard fully served";
}

TEST(PackedLoader, OrderIsAFunctionOfSeedAndEpoch) {
  auto a = *PackedLoader::Create(Shards(kSizes), Options(2, 1));
  auto b = *PackedLoader::Create(Shards(kSizes), Options(2, 1));
  auto c = *PackedLoader::Create(Shards(kSizes), Options(2, 2));
  std::vector<Window> first_a, first_c;
  for (int i = 0; i < 12; ++i) {  // two epochs
    auto rows = Rows(a, 2);
    EXPECT_EQ(rows, Rows(b, 2));
    first_a.insert(first_a.end(), rows.begin(), rows.end());
    auto rows_c = Rows(c, 2);
    first_c.insert(first_c.end(), rows_c.begin(), rows_c.end());
  }
  EXPECT_NE(first_a, first_c);
  // The shards' visiting order is seeded too: the first shard read differs between seeds.
  std::set<int64_t> first_shards;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto loader = *PackedLoader::Create(Shards(kSizes), Options(1, seed));
    first_shards.insert(Rows(loader, 1)[0].shard);
  }
  EXPECT_EQ(first_shards.size(), 3u);
}

TEST(PackedLoader, RanksTakeTheirSliceOfWhatOneRankWithTheGlobalBatchGets) {
  const int64_t batch = 2;
  const int dp = 3;
  auto single = *PackedLoader::Create(Shards(kSizes), Options(batch * dp));
  std::vector<PackedLoader> ranks;
  for (int r = 0; r < dp; ++r) {
    ranks.push_back(*PackedLoader::Create(Shards(kSizes), Options(batch, 7, r, dp)));
  }
  for (int step = 0; step < 6; ++step) {  // three epochs of two global batches
    const std::vector<Window> global = Rows(single, batch * dp);
    for (int r = 0; r < dp; ++r) {
      EXPECT_EQ(Rows(ranks[r], batch),
                std::vector<Window>(global.begin() + r * batch, global.begin() + (r + 1) * batch))
          << "step " << step << " rank " << r;
      EXPECT_EQ(ranks[r].state(), single.state());
    }
  }
}

TEST(PackedLoader, RestoringAMidShardStateResumesTheIdenticalSequence) {
  auto original = *PackedLoader::Create(Shards(kSizes), Options(2));
  Rows(original, 2);
  const LoaderState saved = original.state();
  ASSERT_GT(saved.offset, 0);
  ASSERT_LT(saved.offset, kWindows[saved.shard]) << "mid-shard";
  std::vector<std::vector<Window>> expected;
  for (int i = 0; i < 9; ++i) expected.push_back(Rows(original, 2));  // into epoch 1
  EXPECT_EQ(original.state().epoch, 1);

  auto resumed = *PackedLoader::Create(Shards(kSizes), Options(2));
  ASSERT_TRUE(resumed.Restore(saved).ok());
  EXPECT_EQ(resumed.state(), saved);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(Rows(resumed, 2), expected[i]) << i;
  EXPECT_EQ(resumed.state(), original.state());
}

TEST(PackedLoader, RestoreRefusesAStateThatDoesNotFitTheData) {
  auto loader = *PackedLoader::Create(Shards(kSizes), Options(2));
  auto status = loader.Restore({3, 0, 0});
  EXPECT_NE(status.message().find("loader state (shard 3, offset 0, epoch 0) does not fit this "
                                  "data: 3 shard(s), of which shard 3 has no windows here"),
            std::string::npos)
      << status;
  status = loader.Restore({1, 4, 0});
  EXPECT_NE(status.message().find("shard 1 (in-memory shard 1) has 3 window(s) here"),
            std::string::npos)
      << status;
  EXPECT_FALSE(loader.Restore({0, 0, -1}).ok());
  EXPECT_FALSE(loader.Restore({0, -1, 0}).ok());
  EXPECT_TRUE(loader.Restore({1, 3, 0}).ok()) << "a fully served shard is a valid state";
}

TEST(PackedLoader, WindowRangesSplitTheDataWithoutOverlap) {
  // Held out: the last 5 windows, which cut shard 2 (windows 5..7 and 8..11 are shards 1 and 2).
  LoaderOptions train = Options(2), held = Options(1);
  train.end_window = 7;
  held.first_window = 7;
  held.shuffle = false;
  auto source = Shards(kSizes);
  auto train_loader = *PackedLoader::Create(source, train);
  auto held_loader = *PackedLoader::Create(source, held);
  EXPECT_EQ(train_loader.num_windows(), 7);
  EXPECT_EQ(held_loader.num_windows(), 5);
  std::multiset<Window> seen;
  for (int i = 0; i < 3; ++i) {
    for (Window w : Rows(train_loader, 2)) seen.insert(w);
  }
  std::vector<Window> held_out;
  for (int i = 0; i < 5; ++i) held_out.push_back(Rows(held_loader, 1)[0]);
  EXPECT_EQ(held_out, (std::vector<Window>{{1, 2}, {2, 0}, {2, 1}, {2, 2}, {2, 3}}))
      << "in source order";
  for (Window w : held_out) EXPECT_FALSE(seen.contains(w));
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_FALSE(held_loader.Restore({0, 0, 0}).ok()) << "shard 0 is not in the held-out range";
}

TEST(PackedLoader, TooLittleDataIsAnError) {
  auto loader = PackedLoader::Create(Shards({3 * (kSeqLen + 1)}), Options(2, 0, 0, 2));
  ASSERT_FALSE(loader.ok());
  EXPECT_NE(std::string(loader.status().message()).find("one step needs 4"), std::string::npos);
}

// The loader reads a mapped shard in place: opening a 16 MiB shard and serving from it grows
// the heap by far less than a copy of its tokens would (32 MiB as int32).
TEST(PackedLoader, ServesMappedShardsWithoutCopyingThem) {
  const std::string path =
      (std::filesystem::path(testing::TempDir()) / absl::StrCat("titan_big_", getpid(), ".tok"))
          .string();
  std::vector<int32_t> tokens(int64_t{8} << 20);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 60000);
  ASSERT_TRUE(WriteTokenShard(path, tokens).ok());
  tokens = {};
  tokens.shrink_to_fit();
  const auto heap = [] { return static_cast<int64_t>(mallinfo2().uordblks); };
  const int64_t heap_before = heap();
  {
    auto source = TokenSource::Open(path);
    ASSERT_TRUE(source.ok()) << source.status();
    LoaderOptions options = Options(4);
    options.seq_len = 1023;
    auto loader = PackedLoader::Create(*source, options);
    ASSERT_TRUE(loader.ok()) << loader.status();
    std::vector<int32_t> in(4 * 1023), out(4 * 1023);
    for (int i = 0; i < 10; ++i) loader->Next(in.data(), out.data());
    EXPECT_EQ(out[0], (in[0] + 1) % 60000);
    EXPECT_LT(heap() - heap_before, int64_t{1} << 20);
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace titan
