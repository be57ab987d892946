// The CPU compute's Float8 kernels: the exact reference of torchao's numerics. Quantization
// follows torchao's scaling step by step (amax, the f32 scale, optional power-of-two rounding,
// saturation, round to nearest even); the GEMM decodes each code exactly to f32, multiplies with
// f32 accumulation and applies the inverse scales to the sums, as torch._scaled_mm does.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_compute.h"
#include "core/runtime/profiler.h"
#include "core/tensor/internal/gemm.h"
#include "titan/float16.h"
#include "titan/float8_cast.h"

namespace titan {
namespace {

const float8::Float8Format* FormatOf(DType dtype) {
  if (dtype == DType::kF8E4M3) return &float8::kE4M3;
  if (dtype == DType::kF8E5M2) return &float8::kE5M2;
  return nullptr;
}

std::vector<float> Decode(const TensorView& x) {
  const float8::Float8Format& format = *FormatOf(x.dtype);
  std::vector<float> table(256);
  for (int code = 0; code < 256; ++code) table[code] = float8::DecodeFloat8(code, format);
  const uint8_t* codes = x.data_as<const uint8_t>();
  std::vector<float> out(static_cast<size_t>(x.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = table[codes[i]];
  return out;
}

// torchao's amax_to_scale: max / clamp(amax, 1e-12) in f64, stored as f32, rounded down to a
// power of two if asked. A NaN amax gives a NaN scale, so the NaN reaches every output.
float ScaleFor(double amax, const float8::Float8Format& format, bool power_of_two) {
  float scale = static_cast<float>(format.max_finite / std::max(amax, 1e-12));
  if (power_of_two && std::isfinite(scale)) scale = std::exp2(std::floor(std::log2(scale)));
  return scale;
}

const float* F32Of(const TensorView& x) { return x.data_as<const float>(); }

// x (rows x columns, any float dtype) as f32 into out, transposed if asked. In square tiles, so
// that a transpose's strided side stays within a few cache lines.
void StageAsF32(const TensorView& x, int64_t rows, int64_t columns, bool transpose, float* out) {
  constexpr int64_t kTile = 32;
  const bool f32 = x.dtype == DType::kF32;
  const float* source = f32 ? x.data_as<const float>() : nullptr;
#pragma omp parallel for schedule(static)
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r_end = std::min(r0 + kTile, rows);
    for (int64_t c0 = 0; c0 < columns; c0 += kTile) {
      const int64_t c_end = std::min(c0 + kTile, columns);
      for (int64_t r = r0; r < r_end; ++r) {
        for (int64_t c = c0; c < c_end; ++c) {
          const float v =
              f32 ? source[r * columns + c] : LoadAsF32(x.data, x.dtype, r * columns + c);
          out[transpose ? c * rows + r : r * columns + c] = v;
        }
      }
    }
  }
}

// The largest magnitude of values[0, count), NaN if any is NaN. On the bits without the sign:
// for non-negative floats their order as integers is the order of the values, NaNs above
// infinity, and the integer maximum vectorizes where the float one with its NaN test does not.
double LargestMagnitude(const float* values, int64_t count) {
  uint32_t top = 0;
#pragma omp simd reduction(max : top)
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, values + i, sizeof(bits));
    bits &= 0x7fffffffu;
    top = bits > top ? bits : top;
  }
  if (top > 0x7f800000u) return std::numeric_limits<double>::quiet_NaN();
  float amax = 0.0f;
  std::memcpy(&amax, &top, sizeof(amax));
  return amax;
}

}  // namespace

absl::Status CpuCompute::RunFloat8Gemm(const TensorView& a, const TensorView& inverse_scale_a,
                                       const TensorView& b, const TensorView& inverse_scale_b,
                                       float alpha, float beta, TensorView c) {
  ScopedSpan span("kernel", "Float8Gemm");
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[0];
  const std::vector<float> da = Decode(a), db = Decode(b);
  std::vector<float> sums(static_cast<size_t>(m * n));
  internal::Gemm(CblasNoTrans, CblasTrans, m, n, k, 1.0f, da.data(), k, db.data(), k, 0.0f,
                 sums.data(), n);
  const float* sa = inverse_scale_a.data_as<const float>();
  const float* sb = inverse_scale_b.data_as<const float>();
  const bool row_a = inverse_scale_a.numel() != 1 || m == 1;
  const bool row_b = inverse_scale_b.numel() != 1 || n == 1;
  float* out = c.data_as<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    const float scale_i = sa[row_a ? i : 0];
    for (int64_t j = 0; j < n; ++j) {
      const float value = sums[i * n + j] * scale_i * sb[row_b ? j : 0];
      out[i * n + j] = beta == 0.0f ? alpha * value : alpha * value + beta * out[i * n + j];
    }
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::RunFloat8Quantize(const TensorView& x, const Float8Scaling& scaling,
                                           TensorView out, TensorView inverse_scales) {
  ScopedSpan span("kernel", "Float8Quantize");
  const int64_t rows = x.shape[0], columns = x.shape[1];
  const int64_t out_rows = scaling.transpose ? columns : rows;
  const int64_t out_columns = scaling.transpose ? rows : columns;
  const bool per_row = scaling.granularity == Float8Granularity::kRow;
  const float8::Float8Format& format = *FormatOf(out.dtype);
  // x in f32, laid out as out is (transposed if asked), so rows are contiguous below: x itself
  // when it already is.
  std::vector<float> staged;
  if (x.dtype != DType::kF32 || scaling.transpose) {
    staged.resize(static_cast<size_t>(rows * columns));
    StageAsF32(x, rows, columns, scaling.transpose, staged.data());
  }
  const float* values = staged.empty() ? F32Of(x) : staged.data();
  auto amax_of = [&](int64_t first, int64_t end) {
    return LargestMagnitude(values + first * out_columns, (end - first) * out_columns);
  };
  uint8_t* codes = out.data_as<uint8_t>();
  float* inverse = inverse_scales.data_as<float>();
  const float* given = scaling.amax.data != nullptr ? F32Of(scaling.amax) : nullptr;
  const double tensor_amax = per_row ? 0.0 : given != nullptr ? given[0] : amax_of(0, out_rows);
  const float tensor_scale = per_row ? 0.0f : ScaleFor(tensor_amax, format, scaling.power_of_two);
  if (!per_row) inverse[0] = 1.0f / tensor_scale;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < out_rows; ++r) {
    const double row_amax = !per_row ? 0.0 : given != nullptr ? given[r] : amax_of(r, r + 1);
    const float scale = per_row ? ScaleFor(row_amax, format, scaling.power_of_two) : tensor_scale;
    if (per_row) inverse[r] = 1.0f / scale;
    const float* row = values + r * out_columns;
    for (int64_t c = 0; c < out_columns; ++c) {
      codes[r * out_columns + c] = float8::EncodeFloat8(row[c] * scale, format);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::RunFloat8Amax(const TensorView& x, const Float8Scaling& scaling,
                                       TensorView amax) {
  ScopedSpan span("kernel", "Float8Amax");
  const int64_t rows = x.shape[0], columns = x.shape[1];
  auto abs_at = [&](int64_t i) { return std::fabs(LoadAsF32(x.data, x.dtype, i)); };
  float* out = amax.data_as<float>();
  if (scaling.granularity == Float8Granularity::kTensor) {
    float top = 0.0f;
    bool nan = false;
#pragma omp parallel for reduction(max : top) reduction(|| : nan)
    for (int64_t i = 0; i < rows * columns; ++i) {
      const float v = abs_at(i);
      nan = nan || std::isnan(v);
      top = std::max(top, v);
    }
    out[0] = nan ? std::numeric_limits<float>::quiet_NaN() : top;
    return absl::OkStatus();
  }
  // Row r of out: row r of x, or column r of x when transposed.
  const int64_t out_rows = scaling.transpose ? columns : rows;
  const int64_t length = scaling.transpose ? rows : columns;
  const int64_t row_step = scaling.transpose ? 1 : columns, step = scaling.transpose ? columns : 1;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < out_rows; ++r) {
    float top = 0.0f;
    bool nan = false;
    for (int64_t i = 0; i < length; ++i) {
      const float v = abs_at(r * row_step + i * step);
      nan = nan || std::isnan(v);
      top = std::max(top, v);
    }
    out[r] = nan ? std::numeric_limits<float>::quiet_NaN() : top;
  }
  return absl::OkStatus();
}

}  // namespace titan
