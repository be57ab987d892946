// Column chunks for reductions over rows: each thread owns whole chunks and adds rows in order,
// which keeps sums bit-identical for any thread count, without per-thread partial buffers.
#ifndef TITAN_CORE_TENSOR_INTERNAL_COLUMNS_H_
#define TITAN_CORE_TENSOR_INTERNAL_COLUMNS_H_

#include <cstdint>

namespace titan::internal {

inline constexpr int64_t kColumnChunk = 64;

inline int64_t ColumnChunks(int64_t columns) { return (columns + kColumnChunk - 1) / kColumnChunk; }

}  // namespace titan::internal

#endif  // TITAN_CORE_TENSOR_INTERNAL_COLUMNS_H_
