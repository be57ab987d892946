// Pre-tokenized shards: a 24-byte header (the magic "TITANTOK", a u32 version, a u32 token width
// of 2 or 4 bytes, a u64 token count) then the tokens, little-endian uint16 or uint32. A shard is
// memory-mapped, so opening one costs no reading and many runs share the page cache.
#ifndef TITAN_CORE_DATA_TOKEN_SHARD_H_
#define TITAN_CORE_DATA_TOKEN_SHARD_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "titan/status.h"

namespace titan {

inline constexpr char kTokenShardExtension[] = ".tok";

// Writes `tokens` with the narrowest width that holds them all (uint16 when every token is
// below 65536), through a temporary name so a failed write leaves no shard behind.
absl::Status WriteTokenShard(const std::string& path, std::span<const int32_t> tokens);

class TokenShard {
 public:
  // Maps `path`; a short, foreign or truncated file is an error naming it and what was expected.
  static absl::StatusOr<TokenShard> Open(const std::string& path);
  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&& other) noexcept;
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;
  ~TokenShard();

  int64_t size() const { return count_; }
  int token_bytes() const { return width_; }
  int32_t operator[](int64_t i) const;
  // Appends every token to `out`.
  void AppendTo(std::vector<int32_t>& out) const;

 private:
  TokenShard() = default;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* tokens_ = nullptr;
  int64_t count_ = 0;
  int width_ = 0;
};

// The tokens of `path` (a shard, or a folder whose *.tok shards are read in name order) as one
// stream. An empty folder is an error naming it.
absl::StatusOr<std::vector<int32_t>> ReadTokenShards(const std::string& path,
                                                     int64_t* shard_count = nullptr);

}  // namespace titan

#endif  // TITAN_CORE_DATA_TOKEN_SHARD_H_
