// Context parallelism's layout of a sequence (causal load balancing): every sequence is cut into
// 2 x degree equal chunks and cp rank r holds chunk r and its mirror 2 degree - 1 - r, back to
// back. A rank's early chunk sees few keys, its mirror many, and every rank sees the same number.
#ifndef TITAN_PLUGINS_PARALLEL_CP_CHUNKS_H_
#define TITAN_PLUGINS_PARALLEL_CP_CHUNKS_H_

#include <cstdint>
#include <vector>

#include "titan/attention.h"
#include "titan/status.h"

namespace titan::cp {

struct ChunkLayout {
  int rank = 0, degree = 1;

  // The global index of `of_rank`'s chunk `half` (0: its early chunk, 1: the mirror).
  int64_t Index(int of_rank, int half) const {
    return half == 0 ? of_rank : 2 * int64_t{degree} - 1 - of_rank;
  }
  // The tokens a rank holds of a sequence of `seq_len`: two chunks; an error when seq_len does
  // not divide into 2 x degree chunks.
  absl::StatusOr<int64_t> LocalSeqLen(int64_t seq_len) const;
  // This rank's two chunks of each of whole [batch, seq_len] sequences, back to back.
  absl::StatusOr<std::vector<int32_t>> LocalTokens(const int32_t* whole, int64_t batch,
                                                   int64_t seq_len) const;
  // The two chunks of a local sequence of `local_seq_len` tokens, at their global positions.
  std::vector<TokenRun> Positions(int64_t local_seq_len) const;
};

}  // namespace titan::cp

#endif  // TITAN_PLUGINS_PARALLEL_CP_CHUNKS_H_
