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
  if (full_shape.size() != 2) return {Piece(name, full_shape, {first}, {count}, data)};
  const int64_t columns = full_shape[1];
  int64_t at = first;
  const int64_t end = first + count;
  auto add = [&](int64_t row, int64_t column, int64_t rows, int64_t width) {
    pieces.push_back(Piece(name, full_shape, {row, column}, {rows, width}, data + (at - first)));
    at += rows * width;
  };
  if (at % columns != 0) {  // a partial first row
    add(at / columns, at % columns, 1, std::min(columns - at % columns, end - at));
  }
  if (end - at >= columns) add(at / columns, 0, (end - at) / columns, columns);
  if (at < end) add(at / columns, 0, 1, end - at);  // a partial last row
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
