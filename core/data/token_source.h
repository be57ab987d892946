// The tokens a loader cuts windows from, as a list of shards: the memory-mapped shards of a file
// or folder, read in place so that a corpus larger than memory trains, or token streams held in
// memory (documents tokenized at start-up). Either way the loader sees only TokenSpans.
#ifndef TITAN_CORE_DATA_TOKEN_SOURCE_H_
#define TITAN_CORE_DATA_TOKEN_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/token_shard.h"
#include "titan/status.h"

namespace titan {

class TokenSource {
 public:
  // A shard file, or a folder whose *.tok shards are taken in name order. An empty folder is an
  // error naming it; a bad shard, an error naming the file.
  static absl::StatusOr<std::shared_ptr<const TokenSource>> Open(const std::string& path);
  // Each stream becomes one shard.
  static std::shared_ptr<const TokenSource> FromTokens(std::vector<std::vector<int32_t>> shards);

  int64_t num_shards() const { return static_cast<int64_t>(spans_.size()); }
  const TokenSpan& shard(int64_t i) const { return spans_[i]; }
  // The file shard i was mapped from, or "in-memory shard i".
  const std::string& shard_name(int64_t i) const { return names_[i]; }
  int64_t num_tokens() const;

  // An error naming the first token at or above `vocab_size` (or negative), its shard and
  // position. Reads every token of the mapped shards once, through the page cache.
  absl::Status CheckVocabulary(int64_t vocab_size, absl::string_view tokenizer) const;

 private:
  TokenSource() = default;
  std::vector<TokenShard> mapped_;
  std::vector<std::vector<int32_t>> owned_;
  std::vector<TokenSpan> spans_;  // into mapped_ or owned_
  std::vector<std::string> names_;
};

}  // namespace titan

#endif  // TITAN_CORE_DATA_TOKEN_SOURCE_H_
