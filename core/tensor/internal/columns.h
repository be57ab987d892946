// Column chunks for reductions over rows: each thread owns whole chunks and adds rows in order,
// which keeps sums bit-identical for any thread count, without per-thread partial buffers.
#ifndef TITAN_CORE_TENSOR_INTERNAL_COLUMNS_H_
#define TITAN_CORE_TENSOR_INTERNAL_COLUMNS_H_

#include <algorithm>
#include <cstdint>

namespace titan::internal {

inline constexpr int64_t kColumnChunk = 64;

inline int64_t ColumnChunks(int64_t columns) { return (columns + kColumnChunk - 1) / kColumnChunk; }

// Runs fn(begin, end) for every chunk of [0, columns), chunks spread over the OpenMP threads.
template <typename Fn>
void ForEachColumnChunk(int64_t columns, Fn fn) {
  const int64_t chunks = ColumnChunks(columns);
#pragma omp parallel for schedule(static)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t begin = chunk * kColumnChunk;
    fn(begin, std::min(columns, begin + kColumnChunk));
  }
}

}  // namespace titan::internal

#endif  // TITAN_CORE_TENSOR_INTERNAL_COLUMNS_H_
