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

}  // namespace

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
  shard.width_ = static_cast<int>(header.token_bytes);
  shard.count_ = static_cast<int64_t>(header.count);
  shard.tokens_ = static_cast<const unsigned char*>(shard.map_) + kHeaderBytes;
  return shard;
}

TokenShard::TokenShard(TokenShard&& other) noexcept { *this = std::move(other); }

TokenShard& TokenShard::operator=(TokenShard&& other) noexcept {
  if (this != &other) {
    if (map_ != nullptr) ::munmap(map_, map_bytes_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    tokens_ = std::exchange(other.tokens_, nullptr);
    count_ = std::exchange(other.count_, 0);
    width_ = std::exchange(other.width_, 0);
  }
  return *this;
}

TokenShard::~TokenShard() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

int32_t TokenShard::operator[](int64_t i) const {
  if (width_ == 2) {
    uint16_t value;
    std::memcpy(&value, tokens_ + 2 * i, 2);
    return value;
  }
  uint32_t value;
  std::memcpy(&value, tokens_ + 4 * i, 4);
  return static_cast<int32_t>(value);
}

void TokenShard::AppendTo(std::vector<int32_t>& out) const {
  const size_t start = out.size();
  out.resize(start + static_cast<size_t>(count_));
  for (int64_t i = 0; i < count_; ++i) out[start + i] = (*this)[i];
}

absl::StatusOr<std::vector<int32_t>> ReadTokenShards(const std::string& path,
                                                     int64_t* shard_count) {
  std::error_code error;
  std::vector<std::string> files;
  if (std::filesystem::is_directory(path, error)) {
    for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
      if (entry.is_regular_file() && entry.path().extension() == kTokenShardExtension) {
        files.push_back(entry.path().string());
      }
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      return absl::NotFoundError(absl::StrCat("\"", path, "\": a folder without token shards (*",
                                              kTokenShardExtension, ")"));
    }
  } else {
    files.push_back(path);
  }
  std::vector<int32_t> stream;
  for (const std::string& file : files) {
    TITAN_ASSIGN_OR_RETURN(TokenShard shard, TokenShard::Open(file));
    shard.AppendTo(stream);
  }
  if (shard_count != nullptr) *shard_count = static_cast<int64_t>(files.size());
  return stream;
}

}  // namespace titan
