// Serves windows of seq_len + 1 tokens (inputs and their next-token targets) read straight from a
// TokenSource's shards: a window never crosses a shard's end, and a shard's tail shorter than a
// window is never served. Each epoch visits the shards in a seeded order and each shard's windows
// in a seeded order, so what is served is a pure function of (seed, epoch). The windows of an
// epoch, in that order, are dealt out in global batches of batch x dp_degree; data-parallel rank
// r takes positions [r * batch, (r + 1) * batch) of each, so the ranks together see exactly what
// one rank with the global batch would, with no overlap and no gap.
#ifndef TITAN_CORE_DATA_PACKED_LOADER_H_
#define TITAN_CORE_DATA_PACKED_LOADER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/data/token_source.h"
#include "titan/status.h"

namespace titan {

// Where a loader stands, the same on every rank; a checkpoint saves it and Restore resumes
// exactly.
struct LoaderState {
  int64_t shard = 0;   // the source shard being read (its index in the source)
  int64_t offset = 0;  // windows of that shard served in this epoch, by all ranks together
  int64_t epoch = 0;
  bool operator==(const LoaderState&) const = default;
};

struct LoaderOptions {
  int64_t seq_len = 0;
  int64_t batch = 0;  // this rank's microbatch
  uint64_t seed = 0;
  int dp_rank = 0;
  int dp_degree = 1;
  bool shuffle = true;  // false: shards and windows in source order (evaluation)
  // The windows served, [first_window, end_window) of the source's windows numbered shard after
  // shard (-1: to the last), so a validation split can hold out the tail.
  int64_t first_window = 0;
  int64_t end_window = -1;
};

class PackedLoader {
 public:
  // The range must hold at least one global batch.
  static absl::StatusOr<PackedLoader> Create(std::shared_ptr<const TokenSource> source,
                                             const LoaderOptions& options);

  // Fills tokens and targets, each [batch, seq_len], with this rank's next microbatch. Starts a
  // new epoch when the current one has less than a global batch left.
  void Next(int32_t* tokens, int32_t* targets);

  int64_t num_windows() const { return num_windows_; }  // in the range, all ranks together
  const LoaderState& state() const { return state_; }
  // A state naming a shard without windows in the range, or an offset past its windows, is an
  // error naming the state and what the data holds.
  absl::Status Restore(const LoaderState& state);

 private:
  // A source shard's windows in the range: [first, first + count) of its own windows.
  struct Shard {
    int64_t index, first, count;
  };

  PackedLoader() = default;
  void StartEpoch(int64_t epoch);
  void EnterShard(int64_t position);  // position_ = position, offset 0, the shard's window order
  void Advance();                     // one window served

  std::shared_ptr<const TokenSource> source_;
  LoaderOptions options_;
  std::vector<Shard> shards_;  // those with windows in the range, in source order
  int64_t num_windows_ = 0;
  LoaderState state_;
  int64_t served_ = 0;            // windows served in this epoch
  std::vector<int64_t> order_;    // this epoch's visiting order, indices into shards_
  int64_t position_ = 0;          // state_.shard is shards_[order_[position_]]
  std::vector<int64_t> windows_;  // the current shard's window order
};

// The windows of seq_len + 1 tokens that `source` holds.
int64_t CountWindows(const TokenSource& source, int64_t seq_len);

// Appends BOS, the document's tokens and EOS.
void PackDocument(std::span<const int32_t> document, int32_t bos, int32_t eos,
                  std::vector<int32_t>& stream);

}  // namespace titan

#endif  // TITAN_CORE_DATA_PACKED_LOADER_H_
