#include "embedding_kernels.cuh"
#include "kernel_util.cuh"
#include "layer_kernels.h"

namespace titan::cuda {
namespace {

// One block per row.
__global__ void RmsNormForwardKernel(float* out, float* rstd, const float* inp, const float* weight,
                                     int64_t c, double eps) {
  const float* x = inp + blockIdx.x * c;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < c; j += kThreads) sum += static_cast<double>(x[j]) * x[j];
  sum = BlockSum(sum);
  const float r = static_cast<float>(1.0 / sqrt(sum / c + eps));
  float* y = out + blockIdx.x * c;
  for (int64_t j = threadIdx.x; j < c; j += kThreads) y[j] = x[j] * r * weight[j];
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

// One block per row: dinp += r * (w dy - x * mean(w dy x) * r^2).
__global__ void RmsNormBackwardRowsKernel(float* dinp, const float* dout, const float* inp,
                                          const float* weight, const float* rstd, int64_t c) {
  const float* x = inp + blockIdx.x * c;
  const float* dy = dout + blockIdx.x * c;
  double dot = 0;
  for (int64_t j = threadIdx.x; j < c; j += kThreads) {
    dot += static_cast<double>(weight[j]) * dy[j] * x[j];
  }
  dot = BlockSum(dot);
  const float r = rstd[blockIdx.x];
  const float coefficient = static_cast<float>(dot / c) * r * r;
  float* dx = dinp + blockIdx.x * c;
  for (int64_t j = threadIdx.x; j < c; j += kThreads) {
    dx[j] += r * (weight[j] * dy[j] - x[j] * coefficient);
  }
}

// Grid (column blocks, kRmsNormChunks): partials[chunk, j] = sum over the chunk's rows.
__global__ void RmsNormWeightPartialsKernel(float* partials, const float* dout, const float* inp,
                                            const float* rstd, int64_t n, int64_t c) {
  const int64_t j = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  if (j >= c) return;
  const int64_t per_chunk = (n + kRmsNormChunks - 1) / kRmsNormChunks;
  const int64_t begin = blockIdx.y * per_chunk, end = min(n, begin + per_chunk);
  float sum = 0;
  for (int64_t i = begin; i < end; ++i) sum += dout[i * c + j] * inp[i * c + j] * rstd[i];
  partials[blockIdx.y * c + j] = sum;
}

__global__ void RmsNormWeightFoldKernel(float* dweight, const float* partials, int64_t c) {
  TITAN_GRID_STRIDE(j, c) {
    float sum = 0;
    for (int chunk = 0; chunk < kRmsNormChunks; ++chunk) sum += partials[chunk * c + j];
    dweight[j] += sum;
  }
}

__global__ void RopeTableKernel(float* cos_table, float* sin_table, const float* freq,
                                int64_t seq_len, int64_t half, int64_t position_offset) {
  TITAN_GRID_STRIDE(at, seq_len * half) {
    const int64_t p = at / half, i = at % half;
    const float angle = static_cast<float>(p + position_offset) * freq[i];
    cos_table[at] = static_cast<float>(cos(static_cast<double>(angle)));
    sin_table[at] = static_cast<float>(sin(static_cast<double>(angle)));
  }
}

// One thread per (b, t, head, pair).
__global__ void RopeKernel(float* x, const float* cos_table, const float* sin_table, int64_t t,
                           int64_t heads, int64_t half, int64_t pairs, float direction) {
  TITAN_GRID_STRIDE(at, pairs) {
    const int64_t i = at % half, position = (at / (half * heads)) % t;
    float* pair = x + 2 * at;
    const float c = cos_table[position * half + i];
    const float s = direction * sin_table[position * half + i];
    const float re = pair[0], im = pair[1];
    pair[0] = re * c - im * s;
    pair[1] = re * s + im * c;
  }
}

__global__ void SwiGluForwardKernel(float* out, const float* a, const float* b, int64_t n) {
  TITAN_GRID_STRIDE(i, n) out[i] = a[i] / (1.0f + expf(-a[i])) * b[i];
}

__global__ void SwiGluBackwardKernel(float* da, float* db, const float* dout, const float* a,
                                     const float* b, int64_t n) {
  TITAN_GRID_STRIDE(i, n) {
    const float sigmoid = 1.0f / (1.0f + expf(-a[i]));
    const float silu = a[i] * sigmoid;
    da[i] += dout[i] * b[i] * sigmoid * (1.0f + a[i] * (1.0f - sigmoid));
    db[i] += dout[i] * silu;
  }
}

__global__ void EmbeddingForwardKernel(float* out, const int32_t* tokens, const float* table,
                                       int64_t n, int64_t c, int64_t first_row, int64_t rows) {
  TITAN_GRID_STRIDE(at, n * c) {
    const int64_t row = tokens[at / c] - first_row;
    out[at] = row >= 0 && row < rows ? table[row * c + at % c] : 0.0f;
  }
}

}  // namespace

cudaError_t LaunchRmsNormForward(float* out, float* rstd, const float* inp, const float* weight,
                                 int64_t n, int64_t c, double eps, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  RmsNormForwardKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(out, rstd, inp, weight, c,
                                                                          eps);
  return cudaGetLastError();
}

cudaError_t LaunchRmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                                  const float* weight, const float* rstd, int64_t n, int64_t c,
                                  float* partials, cudaStream_t stream) {
  if (n == 0 || c == 0) return cudaSuccess;
  RmsNormBackwardRowsKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(dinp, dout, inp,
                                                                               weight, rstd, c);
  const dim3 grid(static_cast<unsigned>((c + kThreads - 1) / kThreads), kRmsNormChunks);
  RmsNormWeightPartialsKernel<<<grid, kThreads, 0, stream>>>(partials, dout, inp, rstd, n, c);
  RmsNormWeightFoldKernel<<<BlocksFor(c), kThreads, 0, stream>>>(dweight, partials, c);
  return cudaGetLastError();
}

cudaError_t LaunchRopeTable(float* cos, float* sin, const float* freq, int64_t seq_len,
                            int64_t half, int64_t position_offset, cudaStream_t stream) {
  if (seq_len * half == 0) return cudaSuccess;
  RopeTableKernel<<<BlocksFor(seq_len * half), kThreads, 0, stream>>>(cos, sin, freq, seq_len, half,
                                                                      position_offset);
  return cudaGetLastError();
}

cudaError_t LaunchRope(float* x, const float* cos, const float* sin, int64_t b, int64_t t,
                       int64_t heads, int64_t head_dim, float direction, cudaStream_t stream) {
  const int64_t half = head_dim / 2, pairs = b * t * heads * half;
  if (pairs == 0) return cudaSuccess;
  RopeKernel<<<BlocksFor(pairs), kThreads, 0, stream>>>(x, cos, sin, t, heads, half, pairs,
                                                        direction);
  return cudaGetLastError();
}

cudaError_t LaunchSwiGluForward(float* out, const float* a, const float* b, int64_t n,
                                cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SwiGluForwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(out, a, b, n);
  return cudaGetLastError();
}

cudaError_t LaunchSwiGluBackward(float* da, float* db, const float* dout, const float* a,
                                 const float* b, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SwiGluBackwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(da, db, dout, a, b, n);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingForward(float* out, const int32_t* tokens, const float* table, int64_t n,
                                   int64_t c, int64_t first_row, int64_t rows,
                                   cudaStream_t stream) {
  if (n * c == 0) return cudaSuccess;
  EmbeddingForwardKernel<<<BlocksFor(n * c), kThreads, 0, stream>>>(out, tokens, table, n, c,
                                                                    first_row, rows);
  return cudaGetLastError();
}

cudaError_t LaunchEmbeddingBackward(float* dtable, const float* dout, const int32_t* tokens,
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
