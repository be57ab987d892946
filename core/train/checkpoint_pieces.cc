#include "core/train/checkpoint_pieces.h"

#include <algorithm>

namespace titan {
namespace {

CheckpointPiece Piece(const std::string& name, const std::vector<int64_t>& full_shape,
                      std::vector<int64_t> offset, std::vector<int64_t> shape, float* data) {
  return {name, full_shape, std::move(offset),
          TensorView{data, DType::kF32, Device{}, std::move(shape), {}}};
}

// Appends the boxes covering elements [begin, end) of the block at `offset` (its first
// `offset.size()` indices fixed), as a run of whole indices of the next dimension between
// partial ones at either end; `data` holds element `first` of the tensor.
void CutRun(const std::string& name, const std::vector<int64_t>& full_shape,
            std::vector<int64_t> offset, int64_t begin, int64_t end, int64_t first, float* data,
            std::vector<CheckpointPiece>& pieces) {
  const size_t d = offset.size();
  int64_t inner = 1;  // elements per index of dimension d
  for (size_t k = d + 1; k < full_shape.size(); ++k) inner *= full_shape[k];
  int64_t base = 0;  // the block's first element in the tensor
  for (size_t k = 0; k < d; ++k) {
    int64_t stride = 1;
    for (size_t j = k + 1; j < full_shape.size(); ++j) stride *= full_shape[j];
    base += offset[k] * stride;
  }
  auto add = [&](int64_t index, int64_t extent, int64_t at) {
    std::vector<int64_t> box_offset = offset, shape(d, 1);
    box_offset.push_back(index);
    shape.push_back(extent);
    for (size_t k = d + 1; k < full_shape.size(); ++k) {
      box_offset.push_back(0);
      shape.push_back(full_shape[k]);
    }
    pieces.push_back(Piece(name, full_shape, std::move(box_offset), std::move(shape),
                           data + (base + at - first)));
  };
  if (inner == 1) return add(begin, end - begin, begin);
  if (begin % inner != 0) {  // a part of one index
    const int64_t stop = std::min(end, (begin / inner + 1) * inner);
    std::vector<int64_t> part = offset;
    part.push_back(begin / inner);
    CutRun(name, full_shape, part, begin % inner, stop - (begin / inner) * inner, first, data,
           pieces);
    begin = stop;
  }
  if (end - begin >= inner) {
    add(begin / inner, (end - begin) / inner, begin);
    begin += (end - begin) / inner * inner;
  }
  if (begin < end) {
    std::vector<int64_t> part = offset;
    part.push_back(begin / inner);
    CutRun(name, full_shape, part, 0, end - begin, first, data, pieces);
  }
}

// A run of a tensor of 3 or more dimensions (the experts' stacked weights) as boxes.
std::vector<CheckpointPiece> StackRunPieces(const std::string& name,
                                            const std::vector<int64_t>& full_shape, int64_t first,
                                            int64_t count, float* data) {
  std::vector<CheckpointPiece> pieces;
  CutRun(name, full_shape, {}, first, first + count, first, data, pieces);
  return pieces;
}

}  // namespace

std::vector<CheckpointPiece> FlatRunPieces(const std::string& name,
                                           const std::vector<int64_t>& full_shape, int64_t first,
                                           int64_t count, float* data) {
  std::vector<CheckpointPiece> pieces;
  if (count <= 0) return pieces;
  if (full_shape.size() > 2) return StackRunPieces(name, full_shape, first, count, data);
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
