// The all-gather attention's communication: each rank's keys or values of its chunks gathered
// into whole sequences in global order, and the whole sequences' gradients summed over the
// ranks and handed back to the ranks holding each chunk.
#ifndef TITAN_PLUGINS_PARALLEL_CP_SEQUENCE_GATHER_H_
#define TITAN_PLUGINS_PARALLEL_CP_SEQUENCE_GATHER_H_

#include <cstdint>

#include "plugins/parallel/cp/chunks.h"
#include "plugins/parallel/cp/rows.h"
#include "titan/communicator.h"

namespace titan::cp {

class SequenceGather {
 public:
  // `ranks` holds degree x batch x local_seq_len x width floats (every rank's chunks in rank
  // order), `reduced` batch x local_seq_len x width; both are scratch.
  SequenceGather(Communicator& group, const Rows& rows, const ChunkLayout& layout, float* ranks,
                 float* reduced, int64_t batch, int64_t local_seq_len)
      : group_(group),
        rows_(rows),
        layout_(layout),
        ranks_(ranks),
        reduced_(reduced),
        batch_(batch),
        local_seq_len_(local_seq_len) {}

  // local [batch, local_seq_len, width] (this rank's chunks) -> full [batch, degree x
  // local_seq_len, width] in global order.
  absl::Status Gather(const float* local, float* full, int64_t width) const;
  // The reverse: full's rows of this rank's chunks summed over the ranks, added into local.
  absl::Status ReduceScatter(const float* full, float* local, int64_t width) const;

 private:
  Communicator& group_;
  const Rows& rows_;
  const ChunkLayout& layout_;
  float *ranks_, *reduced_;
  int64_t batch_, local_seq_len_;
};

}  // namespace titan::cp

#endif  // TITAN_PLUGINS_PARALLEL_CP_SEQUENCE_GATHER_H_
