// The CPU compute's Float8 kernels: the exact reference of torchao's numerics. Quantization
// follows torchao's scaling step by step (amax, the f32 scale, optional power-of-two rounding,
// saturation, round to nearest even); the GEMM decodes each code exactly to f32, multiplies with
// f32 accumulation and applies the inverse scales to the sums, as torch._scaled_mm does.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_compute.h"
#include "core/cpu/float8_encode.h"
#include "core/runtime/profiler.h"
#include "core/tensor/internal/gemm.h"
#include "titan/float16.h"
#include "titan/float8_cast.h"

namespace titan {
namespace {

// Rows of the output a transposing kernel reads as f32 at a time: a band of x's columns, so that
// a band's rows are gathered from a few cache lines of each row of x.
constexpr int64_t kTransposedBand = 16;
// Values per piece of a whole-tensor amax, so that a bf16 piece converts within the cache.
constexpr int64_t kAmaxPiece = int64_t{1} << 14;

const float8::Float8Format* FormatOf(DType dtype) {
  if (dtype == DType::kF8E4M3) return &float8::kE4M3;
  if (dtype == DType::kF8E5M2) return &float8::kE5M2;
  return nullptr;
}

std::array<float, 256> TableOf(const float8::Float8Format& format) {
  std::array<float, 256> table;
  for (int code = 0; code < 256; ++code) table[code] = float8::DecodeFloat8(code, format);
  return table;
}

// x's codes as f32 into out, through one table of the 256 values per format.
void Decode(const TensorView& x, float* out) {
  static const std::array<float, 256> kE4M3Values = TableOf(float8::kE4M3);
  static const std::array<float, 256> kE5M2Values = TableOf(float8::kE5M2);
  const float* table = x.dtype == DType::kF8E4M3 ? kE4M3Values.data() : kE5M2Values.data();
  const uint8_t* codes = x.data_as<const uint8_t>();
  const int64_t count = x.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) out[i] = table[codes[i]];
}

// Room for count floats that the caller overwrites before reading: not zero-filled.
std::unique_ptr<float[]> Uninitialized(int64_t count) {
  return std::make_unique_for_overwrite<float[]>(static_cast<size_t>(count));
}

// torchao's amax_to_scale: max / clamp(amax, 1e-12) in f64, stored as f32, rounded down to a
// power of two if asked. A NaN amax gives a NaN scale, so the NaN reaches every output.
float ScaleFor(double amax, const float8::Float8Format& format, bool power_of_two) {
  float scale = static_cast<float>(format.max_finite / std::max(amax, 1e-12));
  if (power_of_two && std::isfinite(scale)) scale = std::exp2(std::floor(std::log2(scale)));
  return scale;
}

// The largest magnitude of values[0, count) as the bits of an f32, above infinity's if any is
// NaN. On the bits without the sign: for non-negative floats their order as integers is the order
// of the values, NaNs above infinity, and the integer maximum vectorizes where the float one with
// its NaN test does not.
uint32_t LargestMagnitudeBits(const float* values, int64_t count) {
  uint32_t top = 0;
#pragma omp simd reduction(max : top)
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, values + i, sizeof(bits));
    bits &= 0x7fffffffu;
    top = bits > top ? bits : top;
  }
  return top;
}

float MagnitudeOf(uint32_t top) {
  if (top > 0x7f800000u) return std::numeric_limits<float>::quiet_NaN();
  float amax = 0.0f;
  std::memcpy(&amax, &top, sizeof(amax));
  return amax;
}

// Rows [first, first + count) of the output's layout of x (rows x columns, f32, bf16 or f16;
// row r is column r of x when transposed) as f32: x's own memory where it already is that, else
// converted into band.
const float* OutputRowsAsF32(const TensorView& x, int64_t rows, int64_t columns, bool transpose,
                             int64_t first, int64_t count, std::vector<float>& band) {
  const bool f32 = x.dtype == DType::kF32;
  if (!transpose && f32) return x.data_as<const float>() + first * columns;
  band.resize(static_cast<size_t>(count * (transpose ? rows : columns)));
  // Each loop twice, for f32 and through LoadAsF32, so that the f32 one has no switch inside.
  auto fill = [&](auto load) {
    if (!transpose) {
      for (int64_t i = 0; i < count * columns; ++i) band[i] = load(first * columns + i);
      return;
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < count; ++j) band[j * rows + r] = load(r * columns + first + j);
    }
  };
  if (f32) {
    fill([source = x.data_as<const float>()](int64_t at) { return source[at]; });
  } else {
    fill([&x](int64_t at) { return LoadAsF32(x.data, x.dtype, at); });
  }
  return band.data();
}

// The largest magnitude of all of x (rows x columns), NaN if any is NaN.
float TensorAmax(const TensorView& x, int64_t rows, int64_t columns) {
  const int64_t piece_rows = std::max<int64_t>(1, kAmaxPiece / std::max<int64_t>(columns, 1));
  uint32_t top = 0;
#pragma omp parallel reduction(max : top)
  {
    std::vector<float> band;
#pragma omp for schedule(static)
    for (int64_t first = 0; first < rows; first += piece_rows) {
      const int64_t count = std::min(piece_rows, rows - first);
      const float* values = OutputRowsAsF32(x, rows, columns, false, first, count, band);
      top = std::max(top, LargestMagnitudeBits(values, count * columns));
    }
  }
  return MagnitudeOf(top);
}

// Calls visit(r, row) for every row r of the output's layout of x (see OutputRowsAsF32), each
// row once, over the threads, row holding out_columns f32 values.
template <typename Visit>
void ForEachOutputRow(const TensorView& x, bool transpose, Visit visit) {
  const int64_t rows = x.shape[0], columns = x.shape[1];
  const int64_t out_rows = transpose ? columns : rows, out_columns = transpose ? rows : columns;
  const int64_t band_rows = transpose ? kTransposedBand : 1;
#pragma omp parallel
  {
    std::vector<float> band;
#pragma omp for schedule(static)
    for (int64_t first = 0; first < out_rows; first += band_rows) {
      const int64_t count = std::min(band_rows, out_rows - first);
      const float* values = OutputRowsAsF32(x, rows, columns, transpose, first, count, band);
      for (int64_t j = 0; j < count; ++j) visit(first + j, values + j * out_columns);
    }
  }
}

}  // namespace

absl::Status CpuCompute::RunFloat8Gemm(const TensorView& a, const TensorView& inverse_scale_a,
                                       const TensorView& b, const TensorView& inverse_scale_b,
                                       float alpha, float beta, TensorView c) {
  ScopedSpan span("kernel", "Float8Gemm");
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[0];
  const std::unique_ptr<float[]> da = Uninitialized(m * k), db = Uninitialized(n * k);
  Decode(a, da.get());
  Decode(b, db.get());
  float* out = c.data_as<float>();
  // The sums go straight to c unless c's old values are still needed (BLAS's beta = 0 writes
  // every sum without reading what was there).
  std::unique_ptr<float[]> separate_sums;
  if (beta != 0.0f) separate_sums = Uninitialized(m * n);
  float* sums = beta != 0.0f ? separate_sums.get() : out;
  internal::Gemm(CblasNoTrans, CblasTrans, m, n, k, 1.0f, da.get(), k, db.get(), k, 0.0f, sums, n);
  const float* sa = inverse_scale_a.data_as<const float>();
  const float* sb = inverse_scale_b.data_as<const float>();
  const bool row_a = inverse_scale_a.numel() != 1 || m == 1;
  const bool row_b = inverse_scale_b.numel() != 1 || n == 1;
  // b's scale for each column, so that the loops below run over contiguous memory and vectorize.
  std::vector<float> scale_b(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) scale_b[j] = sb[row_b ? j : 0];
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    const float scale_i = sa[row_a ? i : 0];
    const float* row_sums = sums + i * n;
    float* row_out = out + i * n;
    if (beta == 0.0f) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) row_out[j] = alpha * (row_sums[j] * scale_i * scale_b[j]);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        row_out[j] = alpha * (row_sums[j] * scale_i * scale_b[j]) + beta * row_out[j];
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::RunFloat8Quantize(const TensorView& x, const Float8Scaling& scaling,
                                           TensorView out, TensorView inverse_scales) {
  ScopedSpan span("kernel", "Float8Quantize");
  const int64_t rows = x.shape[0], columns = x.shape[1];
  const int64_t out_columns = scaling.transpose ? rows : columns;
  const bool per_row = scaling.granularity == Float8Granularity::kRow;
  const float8::Float8Format& format = *FormatOf(out.dtype);
  uint8_t* codes = out.data_as<uint8_t>();
  float* inverse = inverse_scales.data_as<float>();
  const float* given = scaling.amax.data != nullptr ? scaling.amax.data_as<const float>() : nullptr;
  float tensor_scale = 0.0f;
  if (!per_row) {
    const double amax = given != nullptr ? given[0] : TensorAmax(x, rows, columns);
    tensor_scale = ScaleFor(amax, format, scaling.power_of_two);
    inverse[0] = 1.0f / tensor_scale;
  }
  // A row's amax, scale and codes while the row is in the cache.
  ForEachOutputRow(x, scaling.transpose, [&](int64_t r, const float* row) {
    float scale = tensor_scale;
    if (per_row) {
      const double amax =
          given != nullptr ? given[r] : MagnitudeOf(LargestMagnitudeBits(row, out_columns));
      scale = ScaleFor(amax, format, scaling.power_of_two);
      inverse[r] = 1.0f / scale;
    }
    float8::EncodeFloat8Scaled(row, scale, out_columns, format, codes + r * out_columns);
  });
  return absl::OkStatus();
}

absl::Status CpuCompute::RunFloat8Amax(const TensorView& x, const Float8Scaling& scaling,
                                       TensorView amax) {
  ScopedSpan span("kernel", "Float8Amax");
  float* out = amax.data_as<float>();
  if (scaling.granularity == Float8Granularity::kTensor) {
    out[0] = TensorAmax(x, x.shape[0], x.shape[1]);
    return absl::OkStatus();
  }
  // Row r of out: row r of x, or column r of x when transposed.
  const int64_t length = scaling.transpose ? x.shape[0] : x.shape[1];
  ForEachOutputRow(x, scaling.transpose, [&](int64_t r, const float* row) {
    out[r] = MagnitudeOf(LargestMagnitudeBits(row, length));
  });
  return absl::OkStatus();
}

}  // namespace titan
