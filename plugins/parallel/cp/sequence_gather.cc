#include "plugins/parallel/cp/sequence_gather.h"

namespace titan::cp {

absl::Status SequenceGather::Gather(const float* local, float* full, int64_t width) const {
  const int64_t cp = layout_.degree, tl = local_seq_len_, c = tl / 2, t = tl * cp;
  const int64_t block = batch_ * tl * width;
  TITAN_RETURN_IF_ERROR(group_.AllGather(rows_.View(local, block), rows_.View(ranks_, cp * block)));
  for (int q = 0; q < cp; ++q) {
    for (int half = 0; half < 2; ++half) {
      TITAN_RETURN_IF_ERROR(rows_.Copy(ranks_ + q * block, tl, half * c, full, t,
                                       layout_.Index(q, half) * c, c, width, batch_,
                                       /*add=*/false));
    }
  }
  return absl::OkStatus();
}

absl::Status SequenceGather::ReduceScatter(const float* full, float* local, int64_t width) const {
  const int64_t cp = layout_.degree, tl = local_seq_len_, c = tl / 2, t = tl * cp;
  const int64_t block = batch_ * tl * width;
  for (int q = 0; q < cp; ++q) {
    for (int half = 0; half < 2; ++half) {
      TITAN_RETURN_IF_ERROR(rows_.Copy(full, t, layout_.Index(q, half) * c, ranks_ + q * block, tl,
                                       half * c, c, width, batch_, /*add=*/false));
    }
  }
  TITAN_RETURN_IF_ERROR(group_.ReduceScatter(rows_.View(ranks_, cp * block),
                                             rows_.View(reduced_, block), ReduceOp::kSum));
  return rows_.compute().Accumulate(rows_.View(reduced_, block), rows_.View(local, block));
}

}  // namespace titan::cp
