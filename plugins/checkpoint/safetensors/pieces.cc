#include "plugins/checkpoint/safetensors/pieces.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugins/checkpoint/safetensors/convert.h"

namespace titan::safetensors {
namespace {

std::string Shape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// The piece's rectangle, as "[rows] x [cols]" offsets and extents, for errors.
std::string Where(const PieceInfo& p) {
  return absl::StrCat("rank ", p.rank, "'s piece at ", Shape(p.offset), " of extent ",
                      Shape(p.extent));
}

bool Overlap(const PieceInfo& a, const PieceInfo& b) {
  for (size_t d = 0; d < a.offset.size(); ++d) {
    if (a.offset[d] >= b.offset[d] + b.extent[d] || b.offset[d] >= a.offset[d] + a.extent[d]) {
      return false;
    }
  }
  return a.numel() > 0 && b.numel() > 0;
}

class Writer {
 public:
  void Int(int64_t value) { bytes_.append(reinterpret_cast<const char*>(&value), sizeof(value)); }
  void Ints(const std::vector<int64_t>& values) {
    Int(static_cast<int64_t>(values.size()));
    for (int64_t v : values) Int(v);
  }
  void String(const std::string& text) {
    Int(static_cast<int64_t>(text.size()));
    bytes_ += text;
  }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

class Reader {
 public:
  explicit Reader(absl::string_view bytes) : bytes_(bytes) {}
  bool Int(int64_t& value) {
    if (bytes_.size() < sizeof(value)) return false;
    std::memcpy(&value, bytes_.data(), sizeof(value));
    bytes_.remove_prefix(sizeof(value));
    return true;
  }
  bool Ints(std::vector<int64_t>& values) {
    int64_t n;
    if (!Int(n) || n < 0 || static_cast<uint64_t>(n) > bytes_.size() / sizeof(int64_t)) {
      return false;
    }
    values.resize(static_cast<size_t>(n));
    for (int64_t& v : values) Int(v);
    return true;
  }
  bool String(std::string& text) {
    int64_t n;
    if (!Int(n) || n < 0 || static_cast<uint64_t>(n) > bytes_.size()) return false;
    text = std::string(bytes_.substr(0, static_cast<size_t>(n)));
    bytes_.remove_prefix(static_cast<size_t>(n));
    return true;
  }
  bool done() const { return bytes_.empty(); }

 private:
  absl::string_view bytes_;
};

}  // namespace

absl::StatusOr<Box> BoxOf(const CheckpointPiece& piece) {
  auto error = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat("piece of '", piece.name, "': ", message));
  };
  const TensorView& data = piece.data;
  const size_t rank = piece.full_shape.size();
  if (rank < 1) {
    return error(absl::StrCat("expected a tensor of 1 or more dimensions, found shape ",
                              Shape(piece.full_shape)));
  }
  if (piece.offset.size() != rank || data.shape.size() != rank) {
    return error(absl::StrCat("expected an offset and data of ", rank, " dimensions like ",
                              Shape(piece.full_shape), ", found offset ", Shape(piece.offset),
                              " and data ", Shape(data.shape)));
  }
  for (size_t d = 0; d < rank; ++d) {
    if (piece.offset[d] < 0 || data.shape[d] < 0 ||
        piece.offset[d] + data.shape[d] > piece.full_shape[d]) {
      return error(absl::StrCat("data ", Shape(data.shape), " at ", Shape(piece.offset),
                                " lies outside the tensor's shape ", Shape(piece.full_shape)));
    }
  }
  // A tensor of 3 or more dimensions (the experts' stacked weights) is seen as rows of its last
  // dimension: a piece must be a run of those rows, 1 wide in the dimensions before the first it
  // spans more of and whole in those between that one and the last.
  size_t spans = 0;
  while (spans + 2 < rank && data.shape[spans] == 1) ++spans;
  for (size_t d = spans + 1; d + 1 < rank; ++d) {
    if (piece.offset[d] != 0 || data.shape[d] != piece.full_shape[d]) {
      return error(absl::StrCat("data ", Shape(data.shape), " at ", Shape(piece.offset), " of ",
                                Shape(piece.full_shape), " splits dimension ", d,
                                ": expected a run of whole rows of the last dimension"));
    }
  }
  if (data.device.type != DeviceType::kCpu) {
    return error("expected its data on the CPU; copy device tensors to the host first");
  }
  if (!IsStoredFloat(data.dtype)) {
    return error(absl::StrCat("expected f32, bf16 or f16 data, found ", DTypeName(data.dtype)));
  }
  Box box =
      BoxOf(PieceInfo{piece.name, data.dtype, piece.full_shape, piece.offset, data.shape, 0, 0});
  if (!data.strides.empty()) {
    if (data.strides.size() != rank || (box.cols > 1 && data.strides[rank - 1] != 1)) {
      return error(
          absl::StrCat("expected its rows contiguous, found strides ", Shape(data.strides)));
    }
    if (rank >= 2) box.row_stride = data.strides[rank - 2];
    for (size_t d = 1; d + 1 < rank; ++d) {  // the rows of the leading dimensions evenly spaced
      if (data.shape[d - 1] > 1 && data.strides[d - 1] != data.strides[d] * data.shape[d]) {
        return error(absl::StrCat("expected its rows evenly spaced, found strides ",
                                  Shape(data.strides), " for data ", Shape(data.shape)));
      }
    }
    if (box.rows > 1 && box.row_stride < box.cols) {
      return error(absl::StrCat("its rows overlap: strides ", Shape(data.strides), " for data ",
                                Shape(data.shape)));
    }
  }
  if (data.data == nullptr && data.numel() > 0) return error("its data pointer is null");
  return box;
}

Box BoxOf(const PieceInfo& info) {
  const size_t rank = info.full_shape.size();
  if (rank >= 2) {
    // Rows of the last dimension: an index of dimension d spans `inner` of them.
    int64_t row0 = 0, rows = 1, full_rows = 1, inner = 1;
    for (size_t d = rank - 1; d-- > 0;) {
      row0 += info.offset[d] * inner;
      rows *= info.extent[d];
      full_rows *= info.full_shape[d];
      inner *= info.full_shape[d];
    }
    return {row0,
            rows,
            info.offset[rank - 1],
            info.extent[rank - 1],
            full_rows,
            info.full_shape[rank - 1],
            info.extent[rank - 1]};
  }
  return {0, 1, info.offset[0], info.extent[0], 1, info.full_shape[0], info.extent[0]};
}

int64_t PieceInfo::numel() const {
  int64_t n = 1;
  for (int64_t e : extent) n *= e;
  return n;
}

std::vector<PieceInfo> DescribePieces(std::span<const CheckpointPiece> pieces, int rank) {
  std::vector<PieceInfo> infos;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const CheckpointPiece& p = pieces[i];
    infos.push_back(
        {p.name, p.data.dtype, p.full_shape, p.offset, p.data.shape, rank, static_cast<int>(i)});
  }
  return infos;
}

std::string EncodePieceInfos(const std::vector<PieceInfo>& infos) {
  Writer out;
  for (const PieceInfo& p : infos) {
    out.String(p.name);
    out.Int(static_cast<int64_t>(p.dtype));
    out.Ints(p.full_shape);
    out.Ints(p.offset);
    out.Ints(p.extent);
  }
  return std::move(out.bytes());
}

absl::StatusOr<std::vector<PieceInfo>> DecodePieceInfos(absl::string_view bytes, int rank) {
  Reader in(bytes);
  std::vector<PieceInfo> infos;
  while (!in.done()) {
    PieceInfo p;
    int64_t dtype;
    if (!in.String(p.name) || !in.Int(dtype) || !in.Ints(p.full_shape) || !in.Ints(p.offset) ||
        !in.Ints(p.extent) || dtype < 0 || dtype > static_cast<int64_t>(DType::kI64)) {
      return absl::InternalError(absl::StrCat("the description of rank ", rank,
                                              "'s pieces is garbled after ", infos.size()));
    }
    p.dtype = static_cast<DType>(dtype);
    p.rank = rank;
    p.index = static_cast<int>(infos.size());
    infos.push_back(std::move(p));
  }
  return infos;
}

absl::StatusOr<std::vector<TensorSources>> PlanAssembly(std::vector<PieceInfo> pieces) {
  std::map<std::string, std::vector<PieceInfo>> by_name;
  for (PieceInfo& p : pieces) by_name[p.name].push_back(std::move(p));
  std::vector<TensorSources> plan;
  for (auto& [name, group] : by_name) {
    std::sort(group.begin(), group.end(), [](const PieceInfo& a, const PieceInfo& b) {
      return a.rank != b.rank ? a.rank < b.rank : a.index < b.index;
    });
    TensorSources tensor{name, group[0].dtype, group[0].full_shape, {}};
    int64_t covered = 0, numel = 1;
    for (int64_t d : tensor.full_shape) numel *= d;
    for (const PieceInfo& p : group) {
      if (p.full_shape != tensor.full_shape || p.dtype != tensor.dtype) {
        return absl::InvalidArgumentError(
            absl::StrCat("pieces of '", name, "' disagree: rank ", group[0].rank, " holds ",
                         DTypeName(tensor.dtype), " ", Shape(tensor.full_shape), ", rank ", p.rank,
                         " holds ", DTypeName(p.dtype), " ", Shape(p.full_shape)));
      }
      bool replica = false;
      for (const PieceInfo& kept : tensor.pieces) {
        if (kept.offset == p.offset && kept.extent == p.extent) {
          replica = true;
        } else if (Overlap(kept, p)) {
          return absl::InvalidArgumentError(
              absl::StrCat("pieces of '", name, "' overlap: ", Where(kept), " and ", Where(p)));
        }
      }
      if (replica) continue;
      covered += p.numel();
      tensor.pieces.push_back(p);
    }
    if (covered != numel) {
      return absl::InvalidArgumentError(absl::StrCat("the pieces of '", name, "' ",
                                                     Shape(tensor.full_shape), " cover ", covered,
                                                     " of its ", numel, " elements"));
    }
    plan.push_back(std::move(tensor));
  }
  return plan;
}

}  // namespace titan::safetensors
