#include "plugins/checkpoint/dcp/shard_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace titan::dcp {
namespace {

using nlohmann::json;

absl::StatusOr<DType> DTypeFromName(const std::string& name) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kF8E5M2,
                      DType::kI32, DType::kI64}) {
    if (name == DTypeName(dtype)) return dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name, "'"));
}

json PieceJson(const StoredPiece& p) {
  return {{"tensor", p.tensor},          {"full_shape", p.full_shape},
          {"offset", p.box.offset},      {"shape", p.box.shape},
          {"dtype", DTypeName(p.dtype)}, {"file", p.file},
          {"position", p.position},      {"bytes", p.bytes},
          {"raw_bytes", p.raw_bytes}};
}

// j[key] as integers. nlohmann converts a float such as 1e30 to an integer unchecked (undefined
// behaviour), so anything but integers is refused; the readers catch what this throws.
std::vector<int64_t> Integers(const json& j, const char* key) {
  const json& value = j.at(key);
  if (!value.is_array() || !std::all_of(value.begin(), value.end(),
                                        [](const json& v) { return v.is_number_integer(); })) {
    throw std::invalid_argument(
        absl::StrCat(key, ": expected an array of integers, found ", value.dump()));
  }
  return value.get<std::vector<int64_t>>();
}

int64_t Integer(const json& j, const char* key) {
  if (!j.at(key).is_number_integer()) {
    throw std::invalid_argument(
        absl::StrCat(key, ": expected an integer, found ", j.at(key).dump()));
  }
  return j.at(key).get<int64_t>();
}

StoredPiece PieceFromJson(const json& j) {
  StoredPiece p;
  p.tensor = j.at("tensor").get<std::string>();
  p.full_shape = Integers(j, "full_shape");
  p.box.offset = Integers(j, "offset");
  p.box.shape = Integers(j, "shape");
  p.dtype = DTypeFromName(j.at("dtype").get<std::string>()).value();
  p.file = j.at("file").get<std::string>();
  p.position = Integer(j, "position");
  p.bytes = Integer(j, "bytes");
  p.raw_bytes = Integer(j, "raw_bytes");
  return p;
}

// Whether every extent is >= 0 and the tensor's byte count fits an int64 (so the sizes of its
// pieces can be computed without overflow).
bool FitsInBytes(const std::vector<int64_t>& shape, DType dtype) {
  int64_t bytes = static_cast<int64_t>(DTypeSize(dtype));
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes)) return false;
  }
  return true;
}

absl::Status Fsync(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::InternalError(absl::StrCat(path, ": cannot open to sync"));
  int result = ::fsync(fd);
  ::close(fd);
  if (result != 0) return absl::InternalError(absl::StrCat(path, ": fsync failed"));
  return absl::OkStatus();
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// A piece's record must agree with its tensor's and with itself, so that an edited or damaged
// index is reported as what it is rather than as a decompression failure.
absl::Status CheckPieceRecord(const std::string& path, const StoredPiece& piece,
                              const CheckpointTensor& tensor) {
  auto error = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat(path, ": tensor '", piece.tensor, "', piece at [",
                                            absl::StrJoin(piece.box.offset, ", "), "]: ", what,
                                            " (the index was edited or is corrupt)"));
  };
  if (piece.dtype != tensor.dtype || piece.full_shape != tensor.full_shape) {
    return error(absl::StrCat("the tensor is ", DTypeName(tensor.dtype), " ",
                              ShapeText(tensor.full_shape), ", the piece says ",
                              DTypeName(piece.dtype), " ", ShapeText(piece.full_shape)));
  }
  const int64_t expected = piece.box.numel() * static_cast<int64_t>(DTypeSize(piece.dtype));
  if (piece.raw_bytes != expected) {
    return error(absl::StrCat("shape ", ShapeText(piece.box.shape), " of ", DTypeName(piece.dtype),
                              " is ", expected, " bytes, but the piece was stored with ",
                              piece.raw_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<StoredPiece>> WritePieces(
    const std::string& path, const std::string& file_name,
    const std::vector<const CheckpointPiece*>& pieces) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot create"));
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, 3);
  ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
  std::vector<StoredPiece> stored;
  std::vector<char> buffer;
  int64_t position = 0;
  for (const CheckpointPiece* piece : pieces) {
    const size_t raw = piece->data.nbytes();
    buffer.resize(ZSTD_compressBound(raw));
    const size_t bytes =
        ZSTD_compress2(context, buffer.data(), buffer.size(), piece->data.data, raw);
    if (ZSTD_isError(bytes)) {
      ZSTD_freeCCtx(context);
      return absl::InternalError(
          absl::StrCat(path, ": compressing ", piece->name, ": ", ZSTD_getErrorName(bytes)));
    }
    out.write(buffer.data(), static_cast<std::streamsize>(bytes));
    stored.push_back({piece->name, piece->full_shape, Box{piece->offset, piece->data.shape},
                      piece->data.dtype, file_name, position, static_cast<int64_t>(bytes),
                      static_cast<int64_t>(raw)});
    position += static_cast<int64_t>(bytes);
  }
  ZSTD_freeCCtx(context);
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed (disk full?)"));
  TITAN_RETURN_IF_ERROR(Fsync(path));
  return stored;
}

absl::StatusOr<std::vector<char>> ReadPiece(const std::string& folder, const StoredPiece& piece) {
  const std::string path = (std::filesystem::path(folder) / piece.file).string();
  const std::string what = absl::StrCat(path, ": ", piece.tensor);
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  // The index names this file: its absence is a damaged checkpoint, as a bad byte in it is.
  if (error) return absl::DataLossError(absl::StrCat(path, ": cannot read: ", error.message()));
  if (piece.position < 0 || piece.bytes < 0 ||
      static_cast<uintmax_t>(piece.position + piece.bytes) > size) {
    return absl::DataLossError(absl::StrCat(what, ": expected ", piece.bytes, " bytes at offset ",
                                            piece.position, ", but the file has only ", size,
                                            " (truncated?)"));
  }
  std::vector<char> compressed(static_cast<size_t>(piece.bytes));
  std::ifstream in(path, std::ios::binary);
  in.seekg(piece.position);
  in.read(compressed.data(), piece.bytes);
  if (!in) return absl::DataLossError(absl::StrCat(what, ": read failed"));
  // The frame records its own size: a piece the index describes otherwise is named as such.
  const unsigned long long frame = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (frame != ZSTD_CONTENTSIZE_ERROR && frame != ZSTD_CONTENTSIZE_UNKNOWN &&
      frame != static_cast<unsigned long long>(piece.raw_bytes)) {
    return absl::DataLossError(
        absl::StrCat(what, ": the stored data is ", frame, " bytes, but the index describes ",
                     piece.raw_bytes, " bytes (shape ", ShapeText(piece.box.shape), " of ",
                     DTypeName(piece.dtype), "; the index was edited or belongs to other data)"));
  }
  std::vector<char> raw(static_cast<size_t>(piece.raw_bytes));
  const size_t got = ZSTD_decompress(raw.data(), raw.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(got)) {
    return absl::DataLossError(absl::StrCat(what, ": corrupt data (", ZSTD_getErrorName(got), ")"));
  }
  if (static_cast<int64_t>(got) != piece.raw_bytes ||
      piece.raw_bytes != piece.box.numel() * static_cast<int64_t>(DTypeSize(piece.dtype))) {
    return absl::DataLossError(absl::StrCat(what, ": expected ", piece.raw_bytes,
                                            " bytes once decompressed, found ", got));
  }
  return raw;
}

std::string PiecesToJson(const std::vector<StoredPiece>& pieces) {
  json list = json::array();
  for (const StoredPiece& p : pieces) list.push_back(PieceJson(p));
  return list.dump();
}

absl::StatusOr<std::vector<StoredPiece>> PiecesFromJson(const std::string& text,
                                                        const std::string& where) {
  try {
    std::vector<StoredPiece> pieces;
    for (const json& j : json::parse(text)) pieces.push_back(PieceFromJson(j));
    return pieces;
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat(where, ": malformed piece list: ", e.what()));
  }
}

absl::Status WriteIndex(const std::string& path, const Index& index) {
  json tensors = json::object();
  for (const auto& [name, tensor] : index.tensors) {
    tensors[name] = {{"shape", tensor.full_shape}, {"dtype", DTypeName(tensor.dtype)}};
  }
  json pieces = json::array();
  for (const StoredPiece& p : index.pieces) pieces.push_back(PieceJson(p));
  json doc = {
      {"format", "titan-dcp"},      {"version", kFormatVersion}, {"world_size", index.world_size},
      {"metadata", index.metadata}, {"tensors", tensors},        {"pieces", pieces}};
  {
    std::ofstream out(path, std::ios::trunc);
    out << doc.dump(1) << "\n";
    if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  }
  return Fsync(path);
}

absl::StatusOr<Index> ReadIndex(const std::string& folder) {
  const std::string path = (std::filesystem::path(folder) / kIndexFile).string();
  if (!std::filesystem::is_directory(folder)) {
    return absl::NotFoundError(absl::StrCat(folder, ": no such checkpoint folder"));
  }
  std::error_code kind_error;
  if (std::filesystem::exists(path, kind_error) &&
      !std::filesystem::is_regular_file(path, kind_error)) {
    // A stream would read a folder as "basic_filebuf::underflow error reading the file".
    return absl::DataLossError(absl::StrCat(path, " is not a file (a folder?): expected the ",
                                            "index of the dcp checkpoint ", folder));
  }
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, " is missing: ", folder,
                                            " is not a complete dcp checkpoint (a save that was "
                                            "interrupted leaves only a .tmp folder)"));
  }
  try {
    const json doc = json::parse(in);
    if (doc.at("format") != "titan-dcp" || doc.at("version") != kFormatVersion) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": expected format titan-dcp version ", kFormatVersion, ", found ",
                       doc.at("format").dump(), " version ", doc.at("version").dump()));
    }
    Index index;
    index.world_size = static_cast<int>(Integer(doc, "world_size"));
    index.metadata = doc.at("metadata").get<CheckpointMetadata>();
    for (const auto& [name, t] : doc.at("tensors").items()) {
      TITAN_ASSIGN_OR_RETURN(DType dtype, DTypeFromName(t.at("dtype").get<std::string>()));
      const std::vector<int64_t> shape = Integers(t, "shape");
      if (!FitsInBytes(shape, dtype)) {
        return absl::DataLossError(absl::StrCat(
            path, ": ", name, ": expected a tensor's shape, found ", ShapeText(shape)));
      }
      index.tensors[name] = {name, shape, dtype};
    }
    for (const json& j : doc.at("pieces")) {
      StoredPiece piece = PieceFromJson(j);
      auto tensor = index.tensors.find(piece.tensor);
      if (tensor == index.tensors.end()) {
        return absl::DataLossError(
            absl::StrCat(path, ": a piece of unknown tensor '", piece.tensor, "'"));
      }
      // Pieces live in the checkpoint's own folder: a name with a separator (or "..") would make
      // a load read a file elsewhere.
      if (piece.file.empty() || piece.file == "." || piece.file == ".." ||
          piece.file.find('/') != std::string::npos) {
        return absl::DataLossError(absl::StrCat(path, ": ", piece.tensor, ": piece file \"",
                                                piece.file,
                                                "\" is not a file name in the checkpoint folder"));
      }
      absl::Status inside = CheckInside(piece.box, tensor->second.full_shape);
      if (!inside.ok()) {
        return absl::DataLossError(absl::StrCat(path, ": ", piece.tensor, ": ", inside.message()));
      }
      TITAN_RETURN_IF_ERROR(CheckPieceRecord(path, piece, tensor->second));
      index.pieces.push_back(std::move(piece));
    }
    return index;
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": malformed index: ", e.what()));
  }
}

}  // namespace titan::dcp
