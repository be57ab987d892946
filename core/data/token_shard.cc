#include "core/data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace titan {
namespace {

constexpr char kMagic[8] = {'T', 'I', 'T', 'A', 'N', 'T', 'O', 'K'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 24;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t token_bytes;
  uint64_t count;
};
static_assert(sizeof(Header) == kHeaderBytes);
static_assert(std::endian::native == std::endian::little, "token shards are little-endian");

// Width-typed loops, so that the compiler vectorizes the widening and the scan.
template <typename T>
const T* As(const unsigned char* data) {
  return reinterpret_cast<const T*>(data);
}

template <typename T>
int64_t FindOutsideTyped(const T* tokens, int64_t count, int64_t limit) {
  // Chunked: a branch-free maximum per chunk, and a search only in a chunk that has a hit.
  constexpr int64_t kChunk = 1 << 16;
  for (int64_t begin = 0; begin < count; begin += kChunk) {
    const int64_t end = std::min(count, begin + kChunk);
    T high = 0;
    for (int64_t i = begin; i < end; ++i) high = std::max(high, tokens[i]);
    if (static_cast<int64_t>(high) < limit) continue;
    for (int64_t i = begin; i < end; ++i) {
      if (static_cast<int64_t>(tokens[i]) >= limit) return i;
    }
  }
  return -1;
}

}  // namespace

int32_t TokenSpan::operator[](int64_t i) const {
  int32_t value;
  Read(i, 1, &value);
  return value;
}

void TokenSpan::Read(int64_t begin, int64_t count, int32_t* out) const {
  if (count <= 0) return;  // `out` may be an empty vector's null data(): no memcpy from it
  // The header is 24 bytes and mappings start on a page, so the tokens are aligned for their width.
  if (width_ == 2) {
    const uint16_t* tokens = As<uint16_t>(data_) + begin;
    for (int64_t i = 0; i < count; ++i) out[i] = tokens[i];
  } else {
    std::memcpy(out, data_ + 4 * begin, static_cast<size_t>(count) * 4);
  }
}

int64_t TokenSpan::FindOutside(int64_t limit) const {
  // Read as unsigned: a negative int32 in memory, or a uint32 token of 2^31 and above in a shard,
  // is outside too.
  return width_ == 2 ? FindOutsideTyped(As<uint16_t>(data_), count_, limit)
                     : FindOutsideTyped(As<uint32_t>(data_), count_, limit);
}

absl::Status WriteTokenShard(const std::string& path, std::span<const int32_t> tokens) {
  const bool narrow =
      std::all_of(tokens.begin(), tokens.end(), [](int32_t t) { return t >= 0 && t < 65536; });
  if (std::any_of(tokens.begin(), tokens.end(), [](int32_t t) { return t < 0; })) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": token ids must not be negative"));
  }
  Header header;
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kVersion;
  header.token_bytes = narrow ? 2 : 4;
  header.count = tokens.size();
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", temporary));
    out.write(reinterpret_cast<const char*>(&header), sizeof(header));
    if (narrow) {
      std::vector<uint16_t> values(tokens.begin(), tokens.end());
      out.write(reinterpret_cast<const char*>(values.data()),
                static_cast<std::streamsize>(values.size() * 2));
    } else {
      out.write(reinterpret_cast<const char*>(tokens.data()),
                static_cast<std::streamsize>(tokens.size() * 4));
    }
    if (!out.flush()) return absl::DataLossError(absl::StrCat("writing ", temporary, " failed"));
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot rename ", temporary, ": ", error.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenShard> TokenShard::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open the token shard: ", std::strerror(errno)));
  }
  struct stat info;
  if (::fstat(fd, &info) != 0 || static_cast<size_t>(info.st_size) < kHeaderBytes) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat(path, ": expected a token shard's ", kHeaderBytes,
                                            "-byte header, found a file of ",
                                            static_cast<int64_t>(info.st_size), " bytes"));
  }
  TokenShard shard;
  shard.map_bytes_ = static_cast<size_t>(info.st_size);
  shard.map_ = ::mmap(nullptr, shard.map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (shard.map_ == MAP_FAILED) {
    shard.map_ = nullptr;
    return absl::InternalError(absl::StrCat(path, ": mmap failed: ", std::strerror(errno)));
  }
  Header header;
  std::memcpy(&header, shard.map_, sizeof(header));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": expected the magic \"TITANTOK\" of a token shard at byte 0"));
  }
  if (header.version != kVersion) {
    return absl::DataLossError(absl::StrCat(path, ": expected token shard version ", kVersion,
                                            ", found ", header.version, " at byte 8"));
  }
  if (header.token_bytes != 2 && header.token_bytes != 4) {
    return absl::DataLossError(absl::StrCat(path,
                                            ": expected a token width of 2 or 4 bytes, found ",
                                            header.token_bytes, " at byte 12"));
  }
  const uint64_t payload = shard.map_bytes_ - kHeaderBytes;
  if (header.count > payload / header.token_bytes || payload % header.token_bytes != 0 ||
      header.count * header.token_bytes != payload) {
    return absl::DataLossError(absl::StrCat(
        path, ": the header (byte 16) announces ", header.count, " tokens of ", header.token_bytes,
        " bytes, but the file holds ", payload, " bytes after the header: truncated or corrupt"));
  }
  shard.tokens_ =
      TokenSpan(static_cast<const unsigned char*>(shard.map_) + kHeaderBytes,
                static_cast<int64_t>(header.count), static_cast<int>(header.token_bytes));
  return shard;
}

TokenShard::TokenShard(TokenShard&& other) noexcept { *this = std::move(other); }

TokenShard& TokenShard::operator=(TokenShard&& other) noexcept {
  if (this != &other) {
    if (map_ != nullptr) ::munmap(map_, map_bytes_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    tokens_ = std::exchange(other.tokens_, TokenSpan());
  }
  return *this;
}

TokenShard::~TokenShard() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

}  // namespace titan
