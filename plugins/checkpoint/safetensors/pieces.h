// Checkpoint pieces as rectangles of their tensors, what rank 0 learns about every rank's
// pieces, and the plan it assembles each whole tensor from.
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_PIECES_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_PIECES_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/checkpoint.h"
#include "titan/status.h"

namespace titan::safetensors {

// Where a piece sits in its tensor viewed as rows x cols (a 1-D tensor is one row; one of 3 or
// more dimensions has the rows of its last), and how its own rows are laid out.
struct Box {
  int64_t row0 = 0, rows = 1, col0 = 0, cols = 0;
  int64_t full_rows = 1, full_cols = 0;
  int64_t row_stride = 0;  // elements between the piece's rows in its data
};

// Checks a piece can be stored or filled: a box of rows (of more than 2 dimensions: whole in all
// but the first and the last), on the CPU, inside its full shape, of
// f32, bf16 or f16, rows contiguous. Errors name the piece.
absl::StatusOr<Box> BoxOf(const CheckpointPiece& piece);

// Row r of the piece's data.
inline char* PieceRow(const TensorView& data, const Box& box, int64_t r) {
  return static_cast<char*>(data.data) +
         r * box.row_stride * static_cast<int64_t>(DTypeSize(data.dtype));
}

// A piece as rank 0 sees it: its rank and index there, and its place in its tensor.
struct PieceInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> full_shape, offset, extent;
  int rank = 0;
  int index = 0;  // in that rank's list of pieces

  int64_t numel() const;
};

// The rectangle of a piece rank 0 received, its rows packed one after another.
Box BoxOf(const PieceInfo& info);

std::vector<PieceInfo> DescribePieces(std::span<const CheckpointPiece> pieces, int rank);
std::string EncodePieceInfos(const std::vector<PieceInfo>& infos);
absl::StatusOr<std::vector<PieceInfo>> DecodePieceInfos(absl::string_view bytes, int rank);

// One tensor and the pieces that make it up: one of each set of identical replicas.
struct TensorSources {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> full_shape;
  std::vector<PieceInfo> pieces;  // by rank, then index
};

// Groups all ranks' pieces by tensor. Errors: pieces of one tensor that disagree on its shape or
// dtype, that overlap without being replicas, or that leave part of it uncovered.
absl::StatusOr<std::vector<TensorSources>> PlanAssembly(std::vector<PieceInfo> pieces);

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_PIECES_H_
