// The safetensors file format (github.com/huggingface/safetensors): an unsigned 64-bit
// little-endian header size N, N bytes of JSON mapping each tensor's name to its dtype, shape
// and [begin, end) byte range in the data section, plus an optional "__metadata__" object of
// strings; then the data section, the tensors' little-endian bytes without gaps.
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_SAFETENSORS_FILE_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_SAFETENSORS_FILE_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan::safetensors {

// The format's own limit: a larger header is refused before it is parsed.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range in the data section
};

struct FileHeader {
  std::vector<TensorEntry> tensors;  // in the order of their data
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + N: where the data section starts in the file
};

// "F32", "BF16", ... (every titan dtype has one); the reverse is an error for a dtype titan
// does not hold, such as F64.
const char* SafetensorsDTypeName(DType dtype);
absl::StatusOr<DType> DTypeFromSafetensors(absl::string_view name);

// Parses and checks the header of `file`, the whole file's bytes: the JSON, every entry's
// dtype and shape, that each byte range holds exactly its tensor and that the ranges tile the
// data section to the end of the file. Errors name `path` and what was expected and found.
absl::StatusOr<FileHeader> ParseHeader(absl::string_view file, absl::string_view path);

// The 8-byte size and the JSON of `tensors` (sorted by name, data laid out in that order) and
// `metadata`, padded with spaces so the data section starts 8-byte aligned. Fills in each
// entry's byte range.
std::string EncodeHeader(std::vector<TensorEntry>& tensors,
                         const std::map<std::string, std::string>& metadata);

// A file mapped read-only; its bytes stay valid while the object lives.
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  absl::string_view bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const char* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const char* data_;
  size_t size_;
};

// Writes one file: the header first, then each tensor's bytes in header order; Close()
// checks every byte was written and syncs the file to disk.
class FileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<FileWriter>> Create(
      const std::string& path, std::vector<TensorEntry> tensors,
      const std::map<std::string, std::string>& metadata);
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  // The next bytes of the data section, in order; no more than the header announced.
  absl::Status Append(const void* data, size_t bytes);
  absl::Status Close();

 private:
  FileWriter(std::string path, std::FILE* file, std::vector<TensorEntry> tensors)
      : path_(std::move(path)), file_(file), tensors_(std::move(tensors)) {}
  std::string path_;
  std::FILE* file_;
  std::vector<TensorEntry> tensors_;
  uint64_t written_ = 0;  // bytes of the data section so far
};

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_SAFETENSORS_FILE_H_
