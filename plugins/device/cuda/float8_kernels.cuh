// Float8 kernels (torchao's scaling, CpuCompute::Float8Quantize bit for bit) and the host side
// that launches them, templated on the launch as attention_kernels.cuh is, so that the CPU
// emulation test runs the same code. A transposed quantization reads x in tiles of 32 x 32
// through shared memory and writes the codes transposed, both coalesced; its amax, which every
// code needs before the first is written, is a pass of its own that reads x in its own order
// and combines blocks by atomicMax on the bits of |x| (exact whatever the order). On GPUs with
// FP8 (sm_89+) the encoding is the hardware's conversion, on others the emulation's code.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_FLOAT8_KERNELS_CUH_
#define TITAN_PLUGINS_DEVICE_CUDA_FLOAT8_KERNELS_CUH_

#include <cuda_runtime.h>
#ifdef __CUDACC__
#include <cuda_fp8.h>
#endif

#include <cstdint>

#include "float8_kernels.h"
#include "float_convert.cuh"
#include "kernel_util.cuh"

namespace titan::cuda::float8 {

constexpr int kTileSide = 32;                    // a transposed tile is 32 x 32 values
constexpr int kTileRowsPerPass = kThreads / 32;  // rows a block's threads cover at once
constexpr int64_t kAmaxChunkRows = 256;          // rows of x per block of the column amax
// Blocks of a whole tensor's amax at most: each ends with an atomicMax on the one result, and
// 65535 of them on one address took longer than reading the tensor.
constexpr int64_t kAmaxBlocks = 1024;

inline int64_t AmaxBlocksFor(int64_t n) {
  const int64_t blocks = BlocksFor(n);
  return blocks < kAmaxBlocks ? blocks : kAmaxBlocks;
}

// Tiles of `side` covering n things, at least one.
inline int64_t TilesCovering(int64_t n, int64_t side) {
  return n > side ? (n + side - 1) / side : 1;
}

struct Format {
  int mantissa_bits, exponent_bias;
  float max_finite;
  bool has_infinity;
};

__device__ Format FormatOf(Float8Format format) {
  return format == Float8Format::kE4M3 ? Format{3, 7, 448.0f, false}
                                       : Format{2, 15, 57344.0f, true};
}

// titan/float8_cast.h's DecodeFloat8 / EncodeFloat8 on the device.
__device__ float Decode(uint8_t code, const Format& f) {
  const int m = f.mantissa_bits, exponent_mask = (1 << (7 - m)) - 1;
  const int exponent = (code >> m) & exponent_mask, mantissa = code & ((1 << m) - 1);
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  if (exponent == exponent_mask) {
    if (f.has_infinity) return mantissa == 0 ? sign * INFINITY : NAN;
    if (mantissa == (1 << m) - 1) return NAN;
  }
  if (exponent == 0) return sign * ldexpf(static_cast<float>(mantissa), 1 - f.exponent_bias - m);
  return sign * ldexpf(static_cast<float>((1 << m) + mantissa), exponent - f.exponent_bias - m);
}

__device__ uint8_t Encode(float x, const Format& f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  // The GPU's own conversion (cvt.rn.satfinite): round to nearest even, saturated to the largest
  // finite, NaN as 0x7f: the bytes of the code below, which older GPUs and the emulation run.
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, f.mantissa_bits == 3 ? __NV_E4M3 : __NV_E5M2);
#else
  if (isnan(x)) return 0x7f;
  const int m = f.mantissa_bits, min_exponent = 1 - f.exponent_bias;
  const uint8_t sign = signbit(x) ? 0x80 : 0x00;
  const float magnitude = fminf(fabsf(x), f.max_finite);
  int exponent = 0;
  frexpf(magnitude, &exponent);
  exponent = max(exponent - 1, min_exponent);
  const float units = rintf(ldexpf(magnitude, m - exponent));
  const float rounded = fminf(ldexpf(units, exponent - m), f.max_finite);
  if (rounded == 0.0f) return sign;
  frexpf(rounded, &exponent);
  exponent -= 1;
  if (exponent < min_exponent) {
    return sign | static_cast<uint8_t>(ldexpf(rounded, f.exponent_bias - 1 + m));
  }
  const int mantissa = static_cast<int>(ldexpf(rounded, m - exponent)) - (1 << m);
  return sign | static_cast<uint8_t>(((exponent + f.exponent_bias) << m) | mantissa);
#endif
}

// Element (r, c) of out, read from x.
__device__ float Value(const Float8QuantizeArgs& a, int64_t r, int64_t c) {
  const int64_t at = a.transpose ? c * a.columns + r : r * a.columns + c;
  return a.x_is_bf16 ? Bf16ToF32(static_cast<const uint16_t*>(a.x)[at])
                     : static_cast<const float*>(a.x)[at];
}

// |x| as ordered bits: for non-negative floats (NaN included, above infinity) the integer order
// is the float order, so an integer max is exact whatever order the threads run in.
__device__ unsigned AbsBits(float x) { return __float_as_uint(fabsf(x)); }

__device__ unsigned BlockMaxBits(unsigned value) {
  __shared__ unsigned shared[kThreads];
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      shared[threadIdx.x] = max(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  const unsigned top = shared[0];
  __syncthreads();
  return top;
}

// torchao's amax_to_scale (CpuCompute's ScaleFor): max / max(amax, 1e-12) in f64, stored as f32,
// rounded down to a power of two if asked.
__device__ float ScaleFor(float amax, const Format& f, bool power_of_two) {
  if (isnan(amax)) return NAN;
  float scale = static_cast<float>(f.max_finite / fmax(static_cast<double>(amax), 1e-12));
  if (power_of_two && isfinite(scale)) {
    int exponent = 0;
    frexpf(scale, &exponent);
    scale = ldexpf(1.0f, exponent - 1);
  }
  return scale;
}

// One block per row of out.
__global__ void QuantizeRowsKernel(Float8QuantizeArgs a, int64_t out_columns) {
  const Format f = FormatOf(a.format);
  const int64_t r = blockIdx.x;
  float scale;
  if (a.per_row && a.amax_given) {
    scale = ScaleFor(a.amax[r], f, a.power_of_two);
  } else if (a.per_row) {
    unsigned top = 0;
    for (int64_t c = threadIdx.x; c < out_columns; c += kThreads) {
      top = max(top, AbsBits(Value(a, r, c)));
    }
    scale = ScaleFor(__uint_as_float(BlockMaxBits(top)), f, a.power_of_two);
  } else {
    scale = ScaleFor(*a.amax, f, a.power_of_two);
  }
  if (threadIdx.x == 0 && (a.per_row || r == 0)) a.inverse_scales[a.per_row ? r : 0] = 1.0f / scale;
  for (int64_t c = threadIdx.x; c < out_columns; c += kThreads) {
    a.codes[r * out_columns + c] = Encode(Value(a, r, c) * scale, f);
  }
}

// One block per row of out: amax[r] = the row's largest |x|.
__global__ void RowAmaxKernel(Float8QuantizeArgs a, int64_t out_columns) {
  const int64_t r = blockIdx.x;
  unsigned top = 0;
  for (int64_t c = threadIdx.x; c < out_columns; c += kThreads) {
    top = max(top, AbsBits(Value(a, r, c)));
  }
  top = BlockMaxBits(top);
  if (threadIdx.x == 0) a.amax[r] = __uint_as_float(top);
}

__global__ void AbsMaxKernel(const void* x, bool x_is_bf16, int64_t n, float* out) {
  unsigned top = 0;
  TITAN_GRID_STRIDE(i, n) {
    top = max(top, AbsBits(x_is_bf16 ? Bf16ToF32(static_cast<const uint16_t*>(x)[i])
                                     : static_cast<const float*>(x)[i]));
  }
  top = BlockMaxBits(top);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned*>(out), top);
}

__global__ void EpilogueKernel(const float* sums, const float* sa, bool row_a, const float* sb,
                               bool row_b, float alpha, float beta, float* c, int64_t m,
                               int64_t n) {
  TITAN_GRID_STRIDE(at, m * n) {
    const int64_t i = at / n, j = at % n;
    const float value = sums[at] * sa[row_a ? i : 0] * sb[row_b ? j : 0];
    c[at] = beta == 0.0f ? alpha * value : alpha * value + beta * c[at];
  }
}

__global__ void ProductsKernel(const uint8_t* a, Float8Format format_a, const uint8_t* b,
                               Float8Format format_b, float* sums, int64_t m, int64_t n,
                               int64_t k) {
  const Format fa = FormatOf(format_a), fb = FormatOf(format_b);
  TITAN_GRID_STRIDE(at, m * n) {
    const uint8_t* ai = a + (at / n) * k;
    const uint8_t* bj = b + (at % n) * k;
    float sum = 0;
    for (int64_t p = 0; p < k; ++p) sum += Decode(ai[p], fa) * Decode(bj[p], fb);
    sums[at] = sum;
  }
}

// Element (r, c) of x, in x's own layout.
__device__ float Load(const Float8QuantizeArgs& a, int64_t r, int64_t c) {
  const int64_t at = r * a.columns + c;
  return a.x_is_bf16 ? Bf16ToF32(static_cast<const uint16_t*>(a.x)[at])
                     : static_cast<const float*>(a.x)[at];
}

__global__ void ZeroKernel(float* x, int64_t n) { TITAN_GRID_STRIDE(i, n) x[i] = 0.0f; }

// amax[c] = max(amax[c], the largest |x| of column c) over a chunk of kAmaxChunkRows rows: block
// b takes the 32 columns of strip b % strips (a warp reads 32 neighbours of one row).
__global__ void ColumnAmaxKernel(Float8QuantizeArgs a, int64_t strips) {
  __shared__ unsigned partial[kTileRowsPerPass][kTileSide];
  const int tx = threadIdx.x % kTileSide, ty = threadIdx.x / kTileSide;
  const int64_t column = (blockIdx.x % strips) * kTileSide + tx;
  const int64_t first = (blockIdx.x / strips) * kAmaxChunkRows;
  const int64_t end = min(first + kAmaxChunkRows, a.rows);
  unsigned top = 0;
  if (column < a.columns) {
    for (int64_t r = first + ty; r < end; r += kTileRowsPerPass) {
      top = max(top, AbsBits(Load(a, r, column)));
    }
  }
  partial[ty][tx] = top;
  __syncthreads();
  if (ty != 0 || column >= a.columns) return;
  for (int k = 1; k < kTileRowsPerPass; ++k) top = max(top, partial[k][tx]);
  atomicMax(reinterpret_cast<unsigned*>(a.amax) + column, top);
}

// Codes of x^T scaled by a.amax (one, or one per column of x): block b reads the 32 x 32 tile of
// x at columns 32 (b % strips) and rows 32 (b / strips) and writes it as rows of out.
__global__ void TransposedQuantizeKernel(Float8QuantizeArgs a, int64_t strips) {
  __shared__ float tile[kTileSide][kTileSide + 1];  // padded: a column read hits 32 banks
  __shared__ float scales[kTileSide];
  const Format f = FormatOf(a.format);
  const int tx = threadIdx.x % kTileSide, ty = threadIdx.x / kTileSide;
  const int64_t c0 = (blockIdx.x % strips) * kTileSide, r0 = (blockIdx.x / strips) * kTileSide;
  if (ty == 0) {
    const int64_t column = c0 + tx;
    const bool inside = column < a.columns;
    const float scale =
        ScaleFor(a.per_row ? (inside ? a.amax[column] : 0.0f) : a.amax[0], f, a.power_of_two);
    scales[tx] = scale;
    if (r0 == 0 && a.per_row && inside) a.inverse_scales[column] = 1.0f / scale;
    if (blockIdx.x == 0 && tx == 0 && !a.per_row) a.inverse_scales[0] = 1.0f / scale;
  }
  for (int i = ty; i < kTileSide; i += kTileRowsPerPass) {
    const int64_t r = r0 + i, c = c0 + tx;
    tile[i][tx] = r < a.rows && c < a.columns ? Load(a, r, c) : 0.0f;
  }
  __syncthreads();
  for (int j = ty; j < kTileSide; j += kTileRowsPerPass) {
    const int64_t out_row = c0 + j, out_column = r0 + tx;
    if (out_row < a.columns && out_column < a.rows) {
      a.codes[out_row * a.rows + out_column] = Encode(tile[tx][j] * scales[j], f);
    }
  }
}

// The launches, each through launch(kernel, blocks, threads, shared_bytes, arguments...).

// Zeroes amax[0, count) and folds the amaxes of x (as out would be) into them: the whole tensor's
// into amax[0], or with per_row one per row of out.
template <typename Launch>
cudaError_t RunAmax(Launch&& launch, const Float8QuantizeArgs& a) {
  const int64_t out_rows = a.transpose ? a.columns : a.rows;
  const int64_t out_columns = a.transpose ? a.rows : a.columns;
  if (a.per_row && !a.transpose) {  // one block per row, reading it whole
    if (out_rows == 0) return cudaSuccess;
    return launch(RowAmaxKernel, out_rows, kThreads, size_t{0}, a, out_columns);
  }
  const int64_t count = a.per_row ? out_rows : 1;
  cudaError_t error =
      launch(ZeroKernel, int64_t{BlocksFor(count)}, kThreads, size_t{0}, a.amax, count);
  if (error != cudaSuccess || a.rows * a.columns == 0) return error;
  if (!a.per_row) {  // order does not matter: x as it lies
    return launch(AbsMaxKernel, AmaxBlocksFor(a.rows * a.columns), kThreads, size_t{0},
                  static_cast<const void*>(a.x), a.x_is_bf16, a.rows * a.columns, a.amax);
  }
  const int64_t strips = TilesCovering(a.columns, kTileSide);
  return launch(ColumnAmaxKernel, strips * TilesCovering(a.rows, kAmaxChunkRows), kThreads,
                size_t{0}, a, strips);
}

template <typename Launch>
cudaError_t RunQuantize(Launch&& launch, const Float8QuantizeArgs& a) {
  if (!a.transpose) {
    if (a.rows == 0) return cudaSuccess;
    if (!a.per_row && !a.amax_given) {
      const cudaError_t error = RunAmax(launch, a);
      if (error != cudaSuccess) return error;
    }
    // Rows of x are rows of out: one block each, reading it whole (and its amax if per row).
    return launch(QuantizeRowsKernel, a.rows, kThreads, size_t{0}, a, a.columns);
  }
  if (!a.amax_given) {
    const cudaError_t error = RunAmax(launch, a);
    if (error != cudaSuccess) return error;
  }
  Float8QuantizeArgs scaled = a;
  scaled.amax_given = true;  // by now
  // At least one block, which writes the tensor's inverse scale even when x is empty.
  const int64_t strips = TilesCovering(a.columns, kTileSide);
  const int64_t tiles = TilesCovering(a.rows, kTileSide);
  return launch(TransposedQuantizeKernel, strips * tiles, kThreads, size_t{0}, scaled, strips);
}

template <typename Launch>
cudaError_t RunAbsMax(Launch&& launch, const void* x, bool x_is_bf16, int64_t n, float* out) {
  cudaError_t error = launch(ZeroKernel, int64_t{1}, kThreads, size_t{0}, out, int64_t{1});
  if (error != cudaSuccess || n == 0) return error;
  return launch(AbsMaxKernel, AmaxBlocksFor(n), kThreads, size_t{0}, x, x_is_bf16, n, out);
}

}  // namespace titan::cuda::float8

#endif  // TITAN_PLUGINS_DEVICE_CUDA_FLOAT8_KERNELS_CUH_
