#include "plugins/checkpoint/safetensors/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace titan::safetensors {
namespace {

using Json = nlohmann::json;

constexpr struct {
  DType dtype;
  const char* name;
} kDTypes[] = {{DType::kF32, "F32"},        {DType::kBF16, "BF16"},      {DType::kF16, "F16"},
               {DType::kF8E4M3, "F8_E4M3"}, {DType::kF8E5M2, "F8_E5M2"}, {DType::kI32, "I32"},
               {DType::kI64, "I64"}};

std::string Range(uint64_t begin, uint64_t end) { return absl::StrCat("[", begin, ", ", end, ")"); }

// The byte count of a tensor, or an error when it does not fit 64 bits.
absl::StatusOr<uint64_t> ByteSize(const std::vector<int64_t>& shape, DType dtype) {
  uint64_t bytes = DTypeSize(dtype);
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      return absl::InvalidArgumentError("its size overflows 64 bits");
    }
  }
  return bytes;
}

// One header entry: {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}.
absl::StatusOr<TensorEntry> ParseEntry(const std::string& name, const Json& value,
                                       uint64_t data_bytes) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("expected an object, found ", value.dump()));
  }
  TensorEntry entry{name, DType::kF32, {}, 0, 0};
  auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) {
    return absl::InvalidArgumentError("expected a string \"dtype\"");
  }
  TITAN_ASSIGN_OR_RETURN(entry.dtype, DTypeFromSafetensors(dtype->get<std::string>()));
  auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) {
    return absl::InvalidArgumentError("expected an array \"shape\"");
  }
  for (const Json& d : *shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t{INT64_MAX}) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected a shape of non-negative integers, found ", shape->dump()));
    }
    entry.shape.push_back(d.get<int64_t>());
  }
  auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return absl::InvalidArgumentError("expected \"data_offsets\": [begin, end]");
  }
  entry.begin = (*offsets)[0].get<uint64_t>();
  entry.end = (*offsets)[1].get<uint64_t>();
  if (entry.begin > entry.end || entry.end > data_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("data_offsets ", Range(entry.begin, entry.end),
                                                   " lie outside the ", data_bytes,
                                                   " bytes of data"));
  }
  absl::StatusOr<uint64_t> bytes = ByteSize(entry.shape, entry.dtype);
  if (!bytes.ok()) return bytes.status();
  if (*bytes != entry.end - entry.begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape [", absl::StrJoin(entry.shape, ", "), "] of ",
                     SafetensorsDTypeName(entry.dtype), " needs ", *bytes, " bytes, data_offsets ",
                     Range(entry.begin, entry.end), " hold ", entry.end - entry.begin));
  }
  return entry;
}

// The ranges must tile [0, data_bytes): no overlap, no hole, nothing after the last tensor.
absl::Status CheckTiling(std::vector<TensorEntry>& tensors, uint64_t data_bytes) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& t : tensors) {
    if (t.begin < covered) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensors '", previous->name, "' ", Range(previous->begin, previous->end),
                       " and '", t.name, "' ", Range(t.begin, t.end), " overlap"));
    }
    if (t.begin > covered) {
      return absl::InvalidArgumentError(
          absl::StrCat("data bytes ", Range(covered, t.begin), " belong to no tensor"));
    }
    covered = t.end;
    previous = &t;
  }
  if (covered != data_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("data bytes ", Range(covered, data_bytes), " belong to no tensor"));
  }
  return absl::OkStatus();
}

absl::Status ParseMetadata(const Json& value, std::map<std::string, std::string>& metadata) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError("expected \"__metadata__\" to be an object of strings");
  }
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("__metadata__ key '", key, "': expected a string, found ", text.dump()));
    }
    metadata[key] = text.get<std::string>();
  }
  return absl::OkStatus();
}

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  return absl::InternalError(absl::StrCat(path, ": ", what, ": ", std::strerror(errno)));
}

}  // namespace

const char* SafetensorsDTypeName(DType dtype) {
  for (const auto& known : kDTypes) {
    if (known.dtype == dtype) return known.name;
  }
  return "unknown";
}

absl::StatusOr<DType> DTypeFromSafetensors(absl::string_view name) {
  for (const auto& known : kDTypes) {
    if (known.name == name) return known.dtype;
  }
  std::vector<std::string> names;
  for (const auto& known : kDTypes) names.push_back(known.name);
  return absl::InvalidArgumentError(
      absl::StrCat("dtype '", name, "' is not one titan reads (", absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<FileHeader> ParseHeader(absl::string_view file, absl::string_view path) {
  auto error = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
  };
  if (file.size() < 8) {
    return error(absl::StrCat("the file is ", file.size(),
                              " bytes long; expected at least the 8-byte header size"));
  }
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<uint8_t>(file[i]);
  if (header_bytes > kMaxHeaderBytes) {
    return error(absl::StrCat("header size ", header_bytes, " exceeds the format's limit of ",
                              kMaxHeaderBytes, " bytes"));
  }
  if (header_bytes > file.size() - 8) {
    return error(absl::StrCat("header size ", header_bytes, " runs past the end of the file (",
                              file.size(), " bytes)"));
  }
  const absl::string_view text = file.substr(8, header_bytes);
  if (text.empty() || text[0] != '{') return error("expected the JSON header to start with '{'");
  Json header;
  try {
    header = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    return error(absl::StrCat("the JSON header does not parse: ", e.what()));
  }
  FileHeader result;
  result.data_start = 8 + header_bytes;
  const uint64_t data_bytes = file.size() - result.data_start;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      absl::Status status = ParseMetadata(value, result.metadata);
      if (!status.ok()) return error(status.message());
      continue;
    }
    absl::StatusOr<TensorEntry> entry = ParseEntry(name, value, data_bytes);
    if (!entry.ok()) return error(absl::StrCat("tensor '", name, "': ", entry.status().message()));
    result.tensors.push_back(*std::move(entry));
  }
  absl::Status tiling = CheckTiling(result.tensors, data_bytes);
  if (!tiling.ok()) return error(tiling.message());
  return result;
}

std::string EncodeHeader(std::vector<TensorEntry>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (TensorEntry& t : tensors) {
    t.begin = offset;
    t.end = offset + *ByteSize(t.shape, t.dtype);
    offset = t.end;
    header[t.name] = {{"dtype", SafetensorsDTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {t.begin, t.end}}};
  }
  std::string json = header.dump(-1, ' ', false, Json::error_handler_t::replace);
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string encoded(8, '\0');
  for (int i = 0; i < 8; ++i) encoded[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return encoded + json;
}

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path);
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    absl::Status status = ErrnoError("cannot stat", path);
    ::close(fd);
    return status;
  }
  if (!S_ISREG(info.st_mode)) {
    // mmap would refuse a folder as "No such device".
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a file (", S_ISDIR(info.st_mode) ? "a folder" : "a FIFO or device",
        "): expected a safetensors file"));
  }
  const size_t size = static_cast<size_t>(info.st_size);
  void* data = nullptr;
  if (size > 0) {
    data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      absl::Status status = ErrnoError("cannot map", path);
      ::close(fd);
      return status;
    }
  }
  ::close(fd);  // the mapping keeps the file
  return std::unique_ptr<MappedFile>(new MappedFile(path, static_cast<const char*>(data), size));
}

MappedFile::~MappedFile() {
  if (size_ > 0) ::munmap(const_cast<char*>(data_), size_);
}

absl::StatusOr<std::unique_ptr<FileWriter>> FileWriter::Create(
    const std::string& path, std::vector<TensorEntry> tensors,
    const std::map<std::string, std::string>& metadata) {
  for (const TensorEntry& t : tensors) {
    if (!ByteSize(t.shape, t.dtype).ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", t.name, "': its size overflows 64 bits"));
    }
  }
  const std::string header = EncodeHeader(tensors, metadata);
  std::FILE* file = std::fopen(path.c_str(), "wbe");
  if (file == nullptr) return ErrnoError("cannot create", path);
  std::unique_ptr<FileWriter> writer(new FileWriter(path, file, std::move(tensors)));
  if (std::fwrite(header.data(), 1, header.size(), file) != header.size()) {
    return ErrnoError("cannot write the header", path);
  }
  return writer;
}

FileWriter::~FileWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status FileWriter::Append(const void* data, size_t bytes) {
  const uint64_t total = tensors_.empty() ? 0 : tensors_.back().end;
  if (written_ + bytes > total) {
    return absl::InternalError(absl::StrCat(path_, ": ", written_ + bytes,
                                            " bytes of data written, the header holds ", total));
  }
  if (bytes > 0 && std::fwrite(data, 1, bytes, file_) != bytes) {
    return ErrnoError("cannot write", path_);
  }
  written_ += bytes;
  return absl::OkStatus();
}

absl::Status FileWriter::Close() {
  const uint64_t total = tensors_.empty() ? 0 : tensors_.back().end;
  if (written_ != total) {
    return absl::InternalError(
        absl::StrCat(path_, ": closed after ", written_, " of ", total, " bytes of data"));
  }
  std::FILE* file = file_;
  file_ = nullptr;
  const bool flushed = std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const int error = errno;
  if (std::fclose(file) != 0 || !flushed) {
    errno = flushed ? errno : error;
    return ErrnoError("cannot finish writing", path_);
  }
  return absl::OkStatus();
}

}  // namespace titan::safetensors
