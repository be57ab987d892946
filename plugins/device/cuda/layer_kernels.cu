#include "embedding_kernels.cuh"
#include "kernel_util.cuh"
#include "layer_kernels.cuh"
#include "layer_kernels.h"

namespace titan::cuda {
namespace {

__global__ void RopeTableKernel(float* cos_table, float* sin_table, const float* freq,
                                int64_t seq_len, int64_t half, int64_t position_offset) {
  TITAN_GRID_STRIDE(at, seq_len * half) {
    const int64_t p = at / half, i = at % half;
    const float angle = static_cast<float>(p + position_offset) * freq[i];
    cos_table[at] = static_cast<float>(cos(static_cast<double>(angle)));
    sin_table[at] = static_cast<float>(sin(static_cast<double>(angle)));
  }
}

}  // namespace

cudaError_t LaunchRmsNormForward(ActivationOut out, float* rstd, ActivationIn inp,
                                 const float* weight, int64_t n, int64_t c, double eps,
                                 cudaStream_t stream) {
  return layers::RunRmsNormForward(StreamLaunch{stream}, out, rstd, inp, weight, n, c, eps);
}

cudaError_t LaunchRmsNormBackward(ActivationOut dinp, float* dweight, ActivationIn dout,
                                  ActivationIn inp, const float* weight, const float* rstd,
                                  int64_t n, int64_t c, float* partials, cudaStream_t stream) {
  return layers::RunRmsNormBackward(StreamLaunch{stream}, dinp, dweight, dout, inp, weight, rstd, n,
                                    c, partials);
}

cudaError_t LaunchRopeTable(float* cos, float* sin, const float* freq, int64_t seq_len,
                            int64_t half, int64_t position_offset, cudaStream_t stream) {
  if (seq_len * half == 0) return cudaSuccess;
  RopeTableKernel<<<BlocksFor(seq_len * half), kThreads, 0, stream>>>(cos, sin, freq, seq_len, half,
                                                                      position_offset);
  return cudaGetLastError();
}

cudaError_t LaunchRope(ActivationOut x, const float* cos, const float* sin, int64_t b, int64_t t,
                       int64_t heads, int64_t head_dim, float direction, cudaStream_t stream) {
  return layers::RunRope(StreamLaunch{stream}, x, cos, sin, b, t, heads, head_dim, direction);
}

cudaError_t LaunchSwiGluForward(ActivationOut out, ActivationIn a, ActivationIn b, int64_t n,
                                cudaStream_t stream) {
  return layers::RunSwiGluForward(StreamLaunch{stream}, out, a, b, n);
}

cudaError_t LaunchSwiGluBackward(ActivationOut da, ActivationOut db, ActivationIn dout,
                                 ActivationIn a, ActivationIn b, int64_t n, cudaStream_t stream) {
  return layers::RunSwiGluBackward(StreamLaunch{stream}, da, db, dout, a, b, n);
}

cudaError_t LaunchEmbeddingForward(ActivationOut out, const int32_t* tokens, const float* table,
                                   int64_t n, int64_t c, int64_t first_row, int64_t rows,
                                   cudaStream_t stream) {
  return layers::RunEmbeddingForward(StreamLaunch{stream}, out, tokens, table, n, c, first_row,
                                     rows);
}

cudaError_t LaunchEmbeddingBackward(float* dtable, ActivationIn dout, const int32_t* tokens,
                                    int64_t n, int64_t c, int64_t first_row, int64_t rows,
                                    cudaStream_t stream) {
  int device = 0, sms = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error == cudaSuccess) {
    error = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  }
  if (error != cudaSuccess) return error;
  return embedding::RunBackward(StreamLaunch{stream}, dtable, dout, tokens, n, c, first_row, rows,
                                embedding::BackwardBuckets(c, rows, sms));
}

}  // namespace titan::cuda
