#include "plugins/parallel/cp/chunks.h"

#include "absl/strings/str_cat.h"

namespace titan::cp {

absl::StatusOr<int64_t> ChunkLayout::LocalSeqLen(int64_t seq_len) const {
  if (seq_len % (2 * degree) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model input: context parallel over ", degree, " ranks splits each sequence into ",
        2 * degree, " chunks (two per rank, for causal load balancing), so seq_len must be ",
        "divisible by ", 2 * degree, ", found ", seq_len));
  }
  return seq_len / degree;
}

absl::StatusOr<std::vector<int32_t>> ChunkLayout::LocalTokens(const int32_t* whole, int64_t batch,
                                                              int64_t seq_len) const {
  TITAN_ASSIGN_OR_RETURN(const int64_t local_seq_len, LocalSeqLen(seq_len));
  const int64_t c = local_seq_len / 2;
  std::vector<int32_t> local;
  local.reserve(static_cast<size_t>(batch * local_seq_len));
  for (int64_t b = 0; b < batch; ++b) {
    for (int half = 0; half < 2; ++half) {
      const int32_t* from = whole + b * seq_len + Index(rank, half) * c;
      local.insert(local.end(), from, from + c);
    }
  }
  return local;
}

std::vector<TokenRun> ChunkLayout::Positions(int64_t local_seq_len) const {
  const int64_t c = local_seq_len / 2;
  return {{0, c, Index(rank, 0) * c}, {c, c, Index(rank, 1) * c}};
}

}  // namespace titan::cp
