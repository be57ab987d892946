#include "float8_kernels.h"
#include "float_convert.cuh"
#include "kernel_util.cuh"

namespace titan::cuda {
namespace {

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

__global__ void TensorAmaxKernel(Float8QuantizeArgs a, int64_t out_rows, int64_t out_columns) {
  unsigned top = 0;
  TITAN_GRID_STRIDE(at, out_rows * out_columns) {
    top = max(top, AbsBits(Value(a, at / out_columns, at % out_columns)));
  }
  top = BlockMaxBits(top);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<unsigned*>(a.amax), top);
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

}  // namespace

cudaError_t LaunchFloat8Quantize(const Float8QuantizeArgs& args, cudaStream_t stream) {
  const int64_t out_rows = args.transpose ? args.columns : args.rows;
  const int64_t out_columns = args.transpose ? args.rows : args.columns;
  if (out_rows == 0) return cudaSuccess;
  if (!args.per_row && !args.amax_given) {
    cudaError_t error = cudaMemsetAsync(args.amax, 0, sizeof(float), stream);
    if (error != cudaSuccess) return error;
    TensorAmaxKernel<<<BlocksFor(out_rows * out_columns), kThreads, 0, stream>>>(args, out_rows,
                                                                                 out_columns);
  }
  QuantizeRowsKernel<<<static_cast<unsigned>(out_rows), kThreads, 0, stream>>>(args, out_columns);
  return cudaGetLastError();
}

cudaError_t LaunchFloat8Amax(const Float8QuantizeArgs& args, cudaStream_t stream) {
  const int64_t out_rows = args.transpose ? args.columns : args.rows;
  const int64_t out_columns = args.transpose ? args.rows : args.columns;
  if (args.per_row) {
    if (out_rows == 0) return cudaSuccess;
    RowAmaxKernel<<<static_cast<unsigned>(out_rows), kThreads, 0, stream>>>(args, out_columns);
    return cudaGetLastError();
  }
  cudaError_t error = cudaMemsetAsync(args.amax, 0, sizeof(float), stream);
  if (error != cudaSuccess || out_rows == 0) return error;
  TensorAmaxKernel<<<BlocksFor(out_rows * out_columns), kThreads, 0, stream>>>(args, out_rows,
                                                                               out_columns);
  return cudaGetLastError();
}

cudaError_t LaunchAbsMax(const void* x, bool x_is_bf16, int64_t n, float* out,
                         cudaStream_t stream) {
  cudaError_t error = cudaMemsetAsync(out, 0, sizeof(float), stream);
  if (error != cudaSuccess || n == 0) return error;
  AbsMaxKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, x_is_bf16, n, out);
  return cudaGetLastError();
}

cudaError_t LaunchFloat8Epilogue(const float* sums, const float* inverse_scale_a, bool row_a,
                                 const float* inverse_scale_b, bool row_b, float alpha, float beta,
                                 float* c, int64_t m, int64_t n, cudaStream_t stream) {
  if (m * n == 0) return cudaSuccess;
  EpilogueKernel<<<BlocksFor(m * n), kThreads, 0, stream>>>(
      sums, inverse_scale_a, row_a, inverse_scale_b, row_b, alpha, beta, c, m, n);
  return cudaGetLastError();
}

cudaError_t LaunchFloat8Products(const uint8_t* a, Float8Format format_a, const uint8_t* b,
                                 Float8Format format_b, float* sums, int64_t m, int64_t n,
                                 int64_t k, cudaStream_t stream) {
  if (m * n == 0) return cudaSuccess;
  ProductsKernel<<<BlocksFor(m * n), kThreads, 0, stream>>>(a, format_a, b, format_b, sums, m, n,
                                                            k);
  return cudaGetLastError();
}

}  // namespace titan::cuda
