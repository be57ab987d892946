// Float8 quantization (torchao's scaling, CpuCompute::Float8Quantize bit for bit) and the pieces
// of the Float8 GEMM that cuBLASLt does not do, on raw device pointers.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_FLOAT8_KERNELS_H_
#define TITAN_PLUGINS_DEVICE_CUDA_FLOAT8_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace titan::cuda {

enum class Float8Format : int { kE4M3 = 0, kE5M2 = 1 };

// x [rows, columns] (f32, or bf16 when x_is_bf16) into codes [out_rows, out_columns] (x
// transposed when `transpose`); one scale per row of out when `per_row`, else one for all.
// `amax` is scratch for the amaxes (one float, or out_rows floats when `per_row` and
// `transpose`), or the amaxes to scale by when `amax_given` ([1], or one per row of out when
// `per_row`).
struct Float8QuantizeArgs {
  const void* x;
  bool x_is_bf16;
  int64_t rows, columns;
  bool transpose, per_row, power_of_two;
  Float8Format format;
  uint8_t* codes;
  float* inverse_scales;
  float* amax;
  bool amax_given;
};
cudaError_t LaunchFloat8Quantize(const Float8QuantizeArgs& args, cudaStream_t stream);
// Only the amaxes that LaunchFloat8Quantize would scale by, into args.amax ([1], or one per row
// of out when per_row); codes and inverse_scales are not touched.
cudaError_t LaunchFloat8Amax(const Float8QuantizeArgs& args, cudaStream_t stream);

// out[0] = the largest |x| of x [n] (f32, or bf16 when x_is_bf16); 0 when empty, NaN if any is.
cudaError_t LaunchAbsMax(const void* x, bool x_is_bf16, int64_t n, float* out, cudaStream_t stream);

// c[m, n] = alpha * sums[i, j] * inv_a[i or 0] * inv_b[j or 0] + beta * c (beta 0: c not read).
cudaError_t LaunchFloat8Epilogue(const float* sums, const float* inverse_scale_a, bool row_a,
                                 const float* inverse_scale_b, bool row_b, float alpha, float beta,
                                 float* c, int64_t m, int64_t n, cudaStream_t stream);
// sums[m, n] = a . b^T of the decoded codes in f32 (a [m, k], b [n, k]): the plain GEMM for
// what cuBLASLt's FP8 path does not take (GPUs before sm_89, e5m2 by e5m2).
cudaError_t LaunchFloat8Products(const uint8_t* a, Float8Format format_a, const uint8_t* b,
                                 Float8Format format_b, float* sums, int64_t m, int64_t n,
                                 int64_t k, cudaStream_t stream);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_FLOAT8_KERNELS_H_
