// Pre-tokenized shards: a 24-byte header (the magic "TITANTOK", a u32 version, a u32 token width
// of 2 or 4 bytes, a u64 token count) then the tokens, little-endian uint16 or uint32. A shard is
// memory-mapped, so opening one costs no reading and many runs share the page cache.
#ifndef TITAN_CORE_DATA_TOKEN_SHARD_H_
#define TITAN_CORE_DATA_TOKEN_SHARD_H_

#include <cstdint>
#include <span>
#include <string>

#include "titan/status.h"

namespace titan {

inline constexpr char kTokenShardExtension[] = ".tok";

// Tokens where they lie, in a shard's mapping or in memory: little-endian integers of 2 or 4
// bytes. Reading widens them to int32; nothing is copied before that.
class TokenSpan {
 public:
  TokenSpan() = default;
  TokenSpan(const void* data, int64_t count, int width)
      : data_(static_cast<const unsigned char*>(data)), count_(count), width_(width) {}
  explicit TokenSpan(std::span<const int32_t> tokens)
      : TokenSpan(tokens.data(), static_cast<int64_t>(tokens.size()), 4) {}

  int64_t size() const { return count_; }
  int width() const { return width_; }
  const void* data() const { return data_; }
  int32_t operator[](int64_t i) const;
  // Writes tokens [begin, begin + count) to `out`.
  void Read(int64_t begin, int64_t count, int32_t* out) const;
  // The position of the first token that is negative or at least `limit`, or -1.
  int64_t FindOutside(int64_t limit) const;

 private:
  const unsigned char* data_ = nullptr;
  int64_t count_ = 0;
  int width_ = 4;
};

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

  // The tokens, inside the mapping: valid while this shard lives.
  const TokenSpan& tokens() const { return tokens_; }

 private:
  TokenShard() = default;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  TokenSpan tokens_;
};

}  // namespace titan

#endif  // TITAN_CORE_DATA_TOKEN_SHARD_H_
