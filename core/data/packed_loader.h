// Documents packed into one token stream (BOS doc EOS BOS doc EOS ...), cut into windows of
// seq_len + 1 tokens (inputs and their next-token targets), served in an order that is a pure
// function of (seed, epoch), split across data-parallel ranks with no overlap and no gap.
#ifndef TITAN_CORE_DATA_PACKED_LOADER_H_
#define TITAN_CORE_DATA_PACKED_LOADER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan {

// Where a loader stands; a checkpoint saves it and a resumed run restores it exactly.
struct LoaderState {
  int64_t shard = 0;   // the token stream (one today)
  int64_t offset = 0;  // windows served in this epoch, across all ranks
  int64_t epoch = 0;
  bool operator==(const LoaderState&) const = default;
};

class PackedLoader {
 public:
  // `stream` must hold at least one window of each microbatch of every rank.
  static absl::StatusOr<PackedLoader> Create(std::vector<int32_t> stream, int64_t seq_len,
                                             int64_t batch, uint64_t seed, int dp_rank,
                                             int dp_degree, bool shuffle = true);

  // Fills tokens and targets, each [batch, seq_len], with this rank's next microbatch. Starts a
  // new epoch (a new order) when the current one has too few windows left.
  void Next(int32_t* tokens, int32_t* targets);

  int64_t num_windows() const { return num_windows_; }
  const LoaderState& state() const { return state_; }
  absl::Status Restore(const LoaderState& state);

 private:
  PackedLoader() = default;
  void Order();

  std::vector<int32_t> stream_;
  int64_t seq_len_ = 0, batch_ = 0, num_windows_ = 0;
  uint64_t seed_ = 0;
  int dp_rank_ = 0, dp_degree_ = 1;
  bool shuffle_ = true;
  LoaderState state_;
  std::vector<int64_t> order_;  // window indices of state_.epoch
};

// Appends BOS, the document's tokens and EOS.
void PackDocument(std::span<const int32_t> document, int32_t bos, int32_t eos,
                  std::vector<int32_t>& stream);

}  // namespace titan

#endif  // TITAN_CORE_DATA_PACKED_LOADER_H_
