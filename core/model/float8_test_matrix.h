// For the Float8 tests: row-major f32 matrices with magnitudes spread over a few binades, so that
// every piece's (a rank's, a chunk's) own amax differs from the whole's.
#ifndef TITAN_CORE_MODEL_FLOAT8_TEST_MATRIX_H_
#define TITAN_CORE_MODEL_FLOAT8_TEST_MATRIX_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "titan/tensor_view.h"

namespace titan {

// A row-major [rows, columns] matrix.
struct Matrix {
  int64_t rows = 0, columns = 0;
  std::vector<float> values;
  TensorView view() { return {values.data(), DType::kF32, Device{}, {rows, columns}, {}}; }
  // Rows [first, first + count), in place.
  TensorView Rows(int64_t first, int64_t count) {
    return {values.data() + first * columns, DType::kF32, Device{}, {count, columns}, {}};
  }
  // Rows [r0, r0 + nr) x columns [c0, c0 + nc), copied.
  Matrix Block(int64_t r0, int64_t nr, int64_t c0, int64_t nc) const {
    Matrix b{nr, nc, {}};
    for (int64_t r = 0; r < nr; ++r) {
      for (int64_t c = 0; c < nc; ++c) b.values.push_back(values[(r0 + r) * columns + c0 + c]);
    }
    return b;
  }
};

inline Matrix Random(int64_t rows, int64_t columns, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> spread(-3.0f, 3.0f);
  Matrix m{rows, columns, {}};
  for (int64_t i = 0; i < rows * columns; ++i) {
    m.values.push_back(normal(gen) * std::exp2(spread(gen)));
  }
  return m;
}

}  // namespace titan

#endif  // TITAN_CORE_MODEL_FLOAT8_TEST_MATRIX_H_
