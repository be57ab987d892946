#include "core/tensor/embedding.h"

#include <algorithm>
#include <cstring>

#include "core/tensor/internal/columns.h"

namespace titan {

template <typename T>
void EmbeddingForward(T* out, const int32_t* tokens, const T* table, int64_t n, int64_t c,
                      int64_t first_row, int64_t rows) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = tokens[i] - first_row;
    if (row >= 0 && row < rows) {
      std::memcpy(out + i * c, table + row * c, c * sizeof(T));
    } else {
      std::memset(out + i * c, 0, c * sizeof(T));
    }
  }
}

template <typename T>
void EmbeddingBackward(T* dtable, const T* dout, const int32_t* tokens, int64_t n, int64_t c,
                       int64_t first_row, int64_t rows) {
  internal::ForEachColumnChunk(c, [&](int64_t begin, int64_t end) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t index = tokens[i] - first_row;
      if (index < 0 || index >= rows) continue;
      T* row = dtable + index * c;
      const T* grad = dout + i * c;
      for (int64_t j = begin; j < end; ++j) row[j] += grad[j];
    }
  });
}

template void EmbeddingForward(float*, const int32_t*, const float*, int64_t, int64_t, int64_t,
                               int64_t);
template void EmbeddingForward(double*, const int32_t*, const double*, int64_t, int64_t, int64_t,
                               int64_t);
template void EmbeddingBackward(float*, const float*, const int32_t*, int64_t, int64_t, int64_t,
                                int64_t);
template void EmbeddingBackward(double*, const double*, const int32_t*, int64_t, int64_t, int64_t,
                                int64_t);

}  // namespace titan
