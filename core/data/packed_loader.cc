#include "core/data/packed_loader.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"

namespace titan {

void PackDocument(std::span<const int32_t> document, int32_t bos, int32_t eos,
                  std::vector<int32_t>& stream) {
  stream.push_back(bos);
  stream.insert(stream.end(), document.begin(), document.end());
  stream.push_back(eos);
}

absl::StatusOr<PackedLoader> PackedLoader::Create(std::vector<int32_t> stream, int64_t seq_len,
                                                  int64_t batch, uint64_t seed, int dp_rank,
                                                  int dp_degree, bool shuffle) {
  PackedLoader loader;
  loader.num_windows_ = static_cast<int64_t>(stream.size()) / (seq_len + 1);
  if (loader.num_windows_ < batch * dp_degree) {
    return absl::InvalidArgumentError(
        absl::StrCat("the data holds ", stream.size(), " tokens, ", loader.num_windows_,
                     " window(s) of seq_len + 1 = ", seq_len + 1, "; one step needs ",
                     batch * dp_degree, " (batch ", batch, " x ", dp_degree,
                     " data-parallel ranks): give more data or a "
                     "smaller training.seq_len / local_batch_size"));
  }
  loader.stream_ = std::move(stream);
  loader.seq_len_ = seq_len;
  loader.batch_ = batch;
  loader.seed_ = seed;
  loader.dp_rank_ = dp_rank;
  loader.dp_degree_ = dp_degree;
  loader.shuffle_ = shuffle;
  loader.Order();
  return loader;
}

void PackedLoader::Order() {
  order_.resize(num_windows_);
  std::iota(order_.begin(), order_.end(), 0);
  if (!shuffle_) return;
  // Our own Fisher-Yates over mt19937_64: std::shuffle's algorithm differs between libraries.
  std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(state_.epoch));
  for (int64_t i = num_windows_ - 1; i > 0; --i) {
    std::swap(order_[i], order_[static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1))]);
  }
}

void PackedLoader::Next(int32_t* tokens, int32_t* targets) {
  const int64_t global = batch_ * dp_degree_;
  if (state_.offset + global > num_windows_) {
    ++state_.epoch;
    state_.offset = 0;
    Order();
  }
  for (int64_t b = 0; b < batch_; ++b) {
    const int64_t window = order_[state_.offset + dp_rank_ * batch_ + b];
    const int32_t* src = stream_.data() + window * (seq_len_ + 1);
    std::copy(src, src + seq_len_, tokens + b * seq_len_);
    std::copy(src + 1, src + seq_len_ + 1, targets + b * seq_len_);
  }
  state_.offset += global;
}

absl::Status PackedLoader::Restore(const LoaderState& state) {
  if (state.shard != 0 || state.epoch < 0 || state.offset < 0 || state.offset > num_windows_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loader state (shard ", state.shard, ", offset ", state.offset, ", epoch ", state.epoch,
        ") does not fit this data: 1 shard of ", num_windows_, " windows"));
  }
  state_ = state;
  Order();
  return absl::OkStatus();
}

}  // namespace titan
