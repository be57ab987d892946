// A rank's training state as checkpoint pieces of logical tensors: "model/<parameter>",
// "optimizer/<slot>/<parameter>" and small "train/..." tensors. A parameter kept whole is one
// piece; one sharded flat by fsdp becomes the boxes its contiguous run of elements covers.
#ifndef TITAN_CORE_TRAIN_CHECKPOINT_PIECES_H_
#define TITAN_CORE_TRAIN_CHECKPOINT_PIECES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "titan/checkpoint.h"
#include "titan/module.h"

namespace titan {

// The boxes of a tensor of `full_shape` covering the row-major elements [first, first + count)
// held contiguously at `data`: at most three for a matrix (a partial row, whole rows, a partial
// row), one for a vector; for a tensor of more dimensions, boxes likewise whole in every
// dimension after the first one they do not fill.
std::vector<CheckpointPiece> FlatRunPieces(const std::string& name,
                                           const std::vector<int64_t>& full_shape, int64_t first,
                                           int64_t count, float* data);

// The pieces of `parameter` this rank holds, named `prefix` + its name; `base` and `slot`
// (optional) redirect the data into a buffer laid out like the one `base` starts (the
// optimizer's state slot for the parameters at `base`).
std::vector<CheckpointPiece> ParameterPieces(const Parameter& parameter, const std::string& prefix,
                                             const float* base = nullptr, float* slot = nullptr);

// A replicated i64 vector, e.g. "train/step".
CheckpointPiece Int64Piece(const std::string& name, std::vector<int64_t>& values);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_CHECKPOINT_PIECES_H_
