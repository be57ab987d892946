#include "core/train/checkpoint_pieces.h"

namespace titan {
namespace {

CheckpointPiece Piece(const std::string& name, const std::vector<int64_t>& full_shape,
                      std::vector<int64_t> offset, std::vector<int64_t> shape, float* data) {
  return {name, full_shape, std::move(offset),
          TensorView{data, DType::kF32, Device{}, std::move(shape), {}}};
}

}  // namespace

std::vector<CheckpointPiece> FlatRunPieces(const std::string& name,
                                           const std::vector<int64_t>& full_shape, int64_t first,
                                           int64_t count, float* data) {
  std::vector<CheckpointPiece> pieces;
  if (count <= 0) return pieces;
  if (full_shape.size() <= 1) return {Piece(name, full_shape, {first}, {count}, data)};
  // Rows along the first dimension, each a tensor of the remaining ones: a partial first row and
  // a partial last row are runs of that smaller tensor, each piece of which gains this row's
  // index in front; the whole rows between are one box.
  const std::vector<int64_t> inner_shape(full_shape.begin() + 1, full_shape.end());
  int64_t inner = 1;
  for (int64_t extent : inner_shape) inner *= extent;
  int64_t at = first;
  const int64_t end = first + count;
  auto add_partial_row = [&](int64_t row, int64_t start, int64_t length) {
    for (CheckpointPiece& piece :
         FlatRunPieces(name, inner_shape, start, length, data + (at - first))) {
      piece.full_shape = full_shape;
      piece.offset.insert(piece.offset.begin(), row);
      piece.data.shape.insert(piece.data.shape.begin(), 1);
      pieces.push_back(std::move(piece));
    }
    at += length;
  };
  if (at % inner != 0)
    add_partial_row(at / inner, at % inner, std::min(inner - at % inner, end - at));
  if (end - at >= inner) {
    const int64_t rows = (end - at) / inner;
    std::vector<int64_t> offset(full_shape.size(), 0), shape = full_shape;
    offset[0] = at / inner, shape[0] = rows;
    pieces.push_back(
        Piece(name, full_shape, std::move(offset), std::move(shape), data + (at - first)));
    at += rows * inner;
  }
  if (at < end) add_partial_row(at / inner, 0, end - at);
  return pieces;
}

std::vector<CheckpointPiece> ParameterPieces(const Parameter& parameter, const std::string& prefix,
                                             const float* base, float* slot) {
  const bool flat =
      parameter.placements[static_cast<int>(MeshDim::kDpShard)].kind == Placement::Kind::kFlatShard;
  const TensorView& held = flat ? parameter.shard : parameter.value;
  float* data = held.data_as<float>();
  if (slot != nullptr) data = slot + (data - base);
  const std::string name = prefix + parameter.name;
  // Tensor parallelism keeps a box of the logical tensor (value's shape, at local_offset); fsdp
  // may then keep a flat run of that box.
  const std::vector<int64_t>& box_shape = parameter.value.shape;
  std::vector<int64_t> box_offset = parameter.local_offset;
  box_offset.resize(box_shape.size(), 0);
  std::vector<CheckpointPiece> pieces =
      flat ? FlatRunPieces(name, box_shape, parameter.shard_offset, held.numel(), data)
           : std::vector<CheckpointPiece>{Piece(
                 name, box_shape, std::vector<int64_t>(box_shape.size(), 0), box_shape, data)};
  for (CheckpointPiece& piece : pieces) {
    piece.full_shape = parameter.full_shape;
    for (size_t d = 0; d < piece.offset.size() && d < box_offset.size(); ++d) {
      piece.offset[d] += box_offset[d];
    }
  }
  return pieces;
}

CheckpointPiece Int64Piece(const std::string& name, std::vector<int64_t>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  return {name, {n}, {0}, TensorView{values.data(), DType::kI64, Device{}, {n}, {}}};
}

}  // namespace titan
