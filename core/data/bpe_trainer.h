// Learns a byte-level BPE vocabulary from text: the 256 bytes, then the most frequent adjacent
// pair within Llama 3 pre-tokenization pieces merged repeatedly, so any corpus can get its own
// vocabulary in the tiktoken format (ranks = merge order).
#ifndef TITAN_CORE_DATA_BPE_TRAINER_H_
#define TITAN_CORE_DATA_BPE_TRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan {

class BpeTrainer {
 public:
  // Counts the pre-tokenization pieces of one document.
  void AddText(absl::string_view text);
  // Ranks (byte strings in merge order), at most `vocab_size` of them (at least 256); stops
  // early when no pair occurs twice. Ties go to the pair of lower ids, so the result is a
  // function of the text alone.
  absl::StatusOr<std::vector<std::string>> Train(int64_t vocab_size) const;

 private:
  absl::flat_hash_map<std::string, int64_t> piece_counts_;
};

}  // namespace titan

#endif  // TITAN_CORE_DATA_BPE_TRAINER_H_
