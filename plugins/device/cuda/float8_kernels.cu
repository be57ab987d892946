#include "float8_kernels.cuh"
#include "float8_kernels.h"

namespace titan::cuda {

cudaError_t LaunchFloat8Quantize(const Float8QuantizeArgs& args, cudaStream_t stream) {
  return float8::RunQuantize(StreamLaunch{stream}, args);
}

cudaError_t LaunchFloat8Amax(const Float8QuantizeArgs& args, cudaStream_t stream) {
  return float8::RunAmax(StreamLaunch{stream}, args);
}

cudaError_t LaunchAbsMax(const void* x, bool x_is_bf16, int64_t n, float* out,
                         cudaStream_t stream) {
  return float8::RunAbsMax(StreamLaunch{stream}, x, x_is_bf16, n, out);
}

cudaError_t LaunchFloat8Epilogue(const float* sums, const float* inverse_scale_a, bool row_a,
                                 const float* inverse_scale_b, bool row_b, float alpha, float beta,
                                 float* c, int64_t m, int64_t n, cudaStream_t stream) {
  if (m * n == 0) return cudaSuccess;
  float8::EpilogueKernel<<<BlocksFor(m * n), kThreads, 0, stream>>>(
      sums, inverse_scale_a, row_a, inverse_scale_b, row_b, alpha, beta, c, m, n);
  return cudaGetLastError();
}

cudaError_t LaunchFloat8Products(const uint8_t* a, Float8Format format_a, const uint8_t* b,
                                 Float8Format format_b, float* sums, int64_t m, int64_t n,
                                 int64_t k, cudaStream_t stream) {
  if (m * n == 0) return cudaSuccess;
  float8::ProductsKernel<<<BlocksFor(m * n), kThreads, 0, stream>>>(a, format_a, b, format_b, sums,
                                                                    m, n, k);
  return cudaGetLastError();
}

}  // namespace titan::cuda
