#include "core/tensor/arena_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/tensor/internal/crc32c.h"

namespace titan {
namespace {

constexpr char kMagic[8] = {'T', 'I', 'T', 'A', 'N', 'A', 'R', 'N'};
// Version 2 added the checksum; version 1 files (without it) still read.
constexpr uint32_t kVersion = 2;
constexpr std::streamoff kChecksumOffset = sizeof(kMagic) + 2 * sizeof(uint32_t);

// Writes the tensor records, keeping the CRC-32C of what it wrote.
class Writer {
 public:
  explicit Writer(std::ostream& out) : out_(out) {}
  void Bytes(const void* data, size_t count) {
    out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(count));
    crc_ = internal::ExtendCrc32c(crc_, data, count);
  }
  template <typename T>
  void Put(T value) {
    Bytes(&value, sizeof(value));
  }
  void PutString(absl::string_view s) {
    Put(static_cast<uint32_t>(s.size()));
    Bytes(s.data(), s.size());
  }
  uint32_t crc() const { return crc_; }

 private:
  std::ostream& out_;
  uint32_t crc_ = 0;
};

std::string Hex(uint32_t value) { return absl::StrFormat("0x%08x", value); }

// Reads with the file's name and the place in every error.
class Reader {
 public:
  Reader(const std::string& path) : path_(path), in_(path, std::ios::binary) {}
  bool is_open() const { return static_cast<bool>(in_); }

  absl::Status Bytes(void* data, size_t count, absl::string_view what) {
    in_.read(static_cast<char*>(data), static_cast<std::streamsize>(count));
    if (static_cast<size_t>(in_.gcount()) != count) {
      return absl::DataLossError(absl::StrCat(path_, ": truncated at byte ", offset_, ": expected ",
                                              count, " bytes of ", what));
    }
    offset_ += count;
    if (checksumming_) crc_ = internal::ExtendCrc32c(crc_, data, count);
    return absl::OkStatus();
  }
  template <typename T>
  absl::StatusOr<T> Get(absl::string_view what) {
    T value;
    TITAN_RETURN_IF_ERROR(Bytes(&value, sizeof(value), what));
    return value;
  }
  absl::StatusOr<std::string> GetString(absl::string_view what) {
    TITAN_ASSIGN_OR_RETURN(uint32_t size, Get<uint32_t>(what));
    if (size > 4096) return Error(absl::StrCat(what, ": a length below 4096, found ", size));
    std::string s(size, '\0');
    TITAN_RETURN_IF_ERROR(Bytes(s.data(), size, what));
    return s;
  }
  absl::Status Error(absl::string_view message) const {
    return absl::DataLossError(absl::StrCat(path_, " (byte ", offset_, "): expected ", message));
  }
  bool AtEnd() { return in_.peek() == std::char_traits<char>::eof(); }
  // From here on every byte read counts towards crc().
  void StartChecksum() { checksumming_ = true; }
  uint32_t crc() const { return crc_; }

 private:
  std::string path_;
  std::ifstream in_;
  size_t offset_ = 0;
  bool checksumming_ = false;
  uint32_t crc_ = 0;
};

}  // namespace

absl::Status WriteArena(const Arena& arena, const std::string& path) {
  // A temporary name first, so a failed write never leaves a damaged file under `path`.
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", temporary));
    out.write(kMagic, sizeof(kMagic));
    const uint32_t header[3] = {kVersion, static_cast<uint32_t>(arena.size()), 0};
    out.write(reinterpret_cast<const char*>(header), sizeof(header));  // the checksum comes last
    Writer records(out);
    for (int i = 0; i < arena.size(); ++i) {
      const Tensor& t = arena.at(i);
      records.PutString(arena.name(i));
      records.PutString(DTypeName(t.dtype()));
      records.Put(static_cast<uint32_t>(t.shape().size()));
      for (int64_t d : t.shape()) records.Put(d);
      records.Bytes(t.raw_data(), t.nbytes());
    }
    const uint32_t crc = records.crc();
    out.seekp(kChecksumOffset);
    out.write(reinterpret_cast<const char*>(&crc), sizeof(crc));
    if (!out.flush()) {
      out.close();
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);  // a full disk keeps no partial file
      return absl::DataLossError(
          absl::StrCat("writing ", temporary, " failed (disk full?); removed it"));
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error)
    return absl::InternalError(absl::StrCat("cannot rename ", temporary, ": ", error.message()));
  return absl::OkStatus();
}

absl::Status ReadArena(const std::string& path, const Arena& arena) {
  Reader in(path);
  if (!in.is_open()) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  char magic[sizeof(kMagic)];
  TITAN_RETURN_IF_ERROR(in.Bytes(magic, sizeof(magic), "the magic"));
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return in.Error("the magic \"TITANARN\" of a titan arena file");
  }
  TITAN_ASSIGN_OR_RETURN(uint32_t version, in.Get<uint32_t>("the version"));
  if (version != 1 && version != kVersion) {
    return in.Error(absl::StrCat("version 1 or ", kVersion, ", found ", version));
  }
  TITAN_ASSIGN_OR_RETURN(uint32_t count, in.Get<uint32_t>("the tensor count"));
  uint32_t recorded_crc = 0;
  if (version >= 2) {
    TITAN_ASSIGN_OR_RETURN(recorded_crc, in.Get<uint32_t>("the checksum"));
    in.StartChecksum();
  }
  if (count != static_cast<uint32_t>(arena.size())) {
    return in.Error(absl::StrCat(arena.size(), " tensors, found ", count));
  }
  // Read into a copy first: a file that fails half-way leaves the arena as it was.
  std::vector<std::vector<char>> values(count);
  for (int i = 0; i < arena.size(); ++i) {
    const Tensor& t = arena.at(i);
    TITAN_ASSIGN_OR_RETURN(std::string name, in.GetString("a tensor name"));
    TITAN_ASSIGN_OR_RETURN(std::string dtype, in.GetString("a dtype name"));
    TITAN_ASSIGN_OR_RETURN(uint32_t rank, in.Get<uint32_t>("a rank"));
    if (rank > 8) return in.Error(absl::StrCat("a rank of at most 8, found ", rank));
    std::vector<int64_t> shape(rank);
    for (int64_t& d : shape) {
      TITAN_ASSIGN_OR_RETURN(d, in.Get<int64_t>("a dimension"));
    }
    if (name != arena.name(i) || dtype != DTypeName(t.dtype()) || shape != t.shape()) {
      return in.Error(absl::StrCat("tensor ", i, " to be ", arena.name(i), " ",
                                   DTypeName(t.dtype()), " [", absl::StrJoin(t.shape(), ", "),
                                   "], found ", name, " ", dtype, " [", absl::StrJoin(shape, ", "),
                                   "]"));
    }
    values[i].resize(t.nbytes());
    TITAN_RETURN_IF_ERROR(in.Bytes(values[i].data(), t.nbytes(), absl::StrCat("tensor ", name)));
  }
  if (!in.AtEnd()) return in.Error("the end of the file after the last tensor");
  if (version >= 2 && in.crc() != recorded_crc) {
    return absl::DataLossError(
        absl::StrCat(path, ": checksum mismatch: the header records CRC-32C ", Hex(recorded_crc),
                     ", the tensors read hash to ", Hex(in.crc()), " (the file is corrupt)"));
  }
  for (int i = 0; i < arena.size(); ++i) {
    std::memcpy(arena.at(i).raw_data(), values[i].data(), values[i].size());
  }
  return absl::OkStatus();
}

}  // namespace titan
