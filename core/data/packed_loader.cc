#include "core/data/packed_loader.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "titan/splitmix64.h"

namespace titan {
namespace {

// Our own Fisher-Yates over mt19937_64: std::shuffle's algorithm differs between libraries.
void Shuffle(std::vector<int64_t>& items, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int64_t i = static_cast<int64_t>(items.size()) - 1; i > 0; --i) {
    std::swap(items[i], items[static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1))]);
  }
}

}  // namespace

void PackDocument(std::span<const int32_t> document, int32_t bos, int32_t eos,
                  std::vector<int32_t>& stream) {
  stream.push_back(bos);
  stream.insert(stream.end(), document.begin(), document.end());
  stream.push_back(eos);
}

int64_t CountWindows(const TokenSource& source, int64_t seq_len) {
  int64_t windows = 0;
  for (int64_t i = 0; i < source.num_shards(); ++i)
    windows += source.shard(i).size() / (seq_len + 1);
  return windows;
}

absl::StatusOr<PackedLoader> PackedLoader::Create(std::shared_ptr<const TokenSource> source,
                                                  const LoaderOptions& options) {
  if (options.seq_len < 1 || options.batch < 1 || options.dp_degree < 1 || options.dp_rank < 0 ||
      options.dp_rank >= options.dp_degree) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PackedLoader: expected seq_len >= 1, batch >= 1 and 0 <= dp_rank < dp_degree, found ",
        options.seq_len, ", ", options.batch, ", ", options.dp_rank, " and ", options.dp_degree));
  }
  const int64_t window = options.seq_len + 1;
  const int64_t total = CountWindows(*source, options.seq_len);
  const int64_t end = options.end_window < 0 ? total : options.end_window;
  if (options.first_window < 0 || options.first_window > end || end > total) {
    return absl::InvalidArgumentError(
        absl::StrCat("PackedLoader: the window range [", options.first_window, ", ", end,
                     ") is not within the data's ", total, " windows"));
  }
  PackedLoader loader;
  int64_t base = 0;  // the source's windows before shard i
  for (int64_t i = 0; i < source->num_shards(); ++i) {
    const int64_t count = source->shard(i).size() / window;
    const int64_t first = std::max(options.first_window, base);
    const int64_t last = std::min(end, base + count);
    if (first < last) loader.shards_.push_back({i, first - base, last - first});
    base += count;
  }
  loader.num_windows_ = end - options.first_window;
  const int64_t global = options.batch * options.dp_degree;
  if (loader.num_windows_ < global) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the data holds ", loader.num_windows_, " window(s) of seq_len + 1 = ", window, " (",
        source->num_tokens(), " tokens in ", source->num_shards(), " shard(s)); one step needs ",
        global, " (batch ", options.batch, " x ", options.dp_degree,
        " data-parallel ranks): give more data or a smaller training.seq_len / local_batch_size"));
  }
  loader.source_ = std::move(source);
  loader.options_ = options;
  loader.StartEpoch(0);
  return loader;
}

void PackedLoader::StartEpoch(int64_t epoch) {
  state_.epoch = epoch;
  served_ = 0;
  order_.resize(shards_.size());
  std::iota(order_.begin(), order_.end(), 0);
  if (options_.shuffle)
    Shuffle(order_, SplitMix64(SplitMix64(options_.seed) ^ static_cast<uint64_t>(epoch)));
  EnterShard(0);
}

void PackedLoader::EnterShard(int64_t position) {
  const Shard& shard = shards_[order_[position]];
  position_ = position;
  state_.shard = shard.index;
  state_.offset = 0;
  windows_.resize(shard.count);
  std::iota(windows_.begin(), windows_.end(), shard.first);
  if (options_.shuffle) {
    Shuffle(windows_,
            SplitMix64(SplitMix64(SplitMix64(options_.seed) ^ static_cast<uint64_t>(state_.epoch)) ^
                       static_cast<uint64_t>(shard.index)));
  }
}

void PackedLoader::Advance() {
  ++state_.offset;
  ++served_;
  if (state_.offset == shards_[order_[position_]].count &&
      position_ + 1 < static_cast<int64_t>(order_.size())) {
    EnterShard(position_ + 1);
  }
}

void PackedLoader::Next(int32_t* tokens, int32_t* targets) {
  const int64_t batch = options_.batch, seq_len = options_.seq_len;
  const int64_t global = batch * options_.dp_degree;
  if (served_ + global > num_windows_) StartEpoch(state_.epoch + 1);
  const int64_t mine = options_.dp_rank * batch;
  for (int64_t slot = 0; slot < global; ++slot) {
    if (slot >= mine && slot < mine + batch) {
      const TokenSpan& span = source_->shard(state_.shard);
      const int64_t start = windows_[state_.offset] * (seq_len + 1);
      const int64_t row = (slot - mine) * seq_len;
      span.Read(start, seq_len, tokens + row);
      span.Read(start + 1, seq_len, targets + row);
    }
    Advance();
  }
}

absl::Status PackedLoader::Restore(const LoaderState& state) {
  const auto shard = std::find_if(shards_.begin(), shards_.end(),
                                  [&](const Shard& s) { return s.index == state.shard; });
  if (shard == shards_.end() || state.epoch < 0 || state.offset < 0 ||
      state.offset > shard->count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loader state (shard ", state.shard, ", offset ", state.offset, ", epoch ", state.epoch,
        ") does not fit this data: ", source_->num_shards(), " shard(s), ",
        shard == shards_.end()
            ? absl::StrCat("of which shard ", state.shard, " has no windows here")
            : absl::StrCat("shard ", state.shard, " (", source_->shard_name(state.shard), ") has ",
                           shard->count, " window(s) here"),
        "; was it saved with other data or another seq_len?"));
  }
  StartEpoch(state.epoch);
  const int64_t target = shard - shards_.begin();
  int64_t position = 0;
  for (; order_[position] != target; ++position) served_ += shards_[order_[position]].count;
  EnterShard(position);
  for (int64_t i = 0; i < state.offset; ++i) Advance();
  return absl::OkStatus();
}

}  // namespace titan
