// The model's layer kernels whose operands are activations (RMSNorm, RoPE, SwiGLU, the embedding's
// forward), each the arithmetic of the CPU backend's (core/tensor/*.cc) with its sums in a fixed
// order, templated on the element types of its activations (activation.cuh: float, or bf16 read
// into f32 and written rounded once). Run* enqueue them through launch(kernel, blocks, threads,
// shared_bytes, arguments...): kernel_util.cuh's StreamLaunch on a GPU, the emulation's launcher
// in the tests (cuda_emulation.h).
#ifndef TITAN_PLUGINS_DEVICE_CUDA_LAYER_KERNELS_CUH_
#define TITAN_PLUGINS_DEVICE_CUDA_LAYER_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "activation.cuh"
#include "kernel_util.cuh"
#include "layer_kernels.h"  // kRmsNormChunks

namespace titan::cuda::layers {

// One block per row.
template <typename X, typename Y>
__global__ void RmsNormForwardKernel(Y* out, float* rstd, const X* inp, const float* weight,
                                     int64_t c, double eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * c;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < c; j += kThreads) {
    const float x = Load(inp, row + j);
    sum += static_cast<double>(x) * x;
  }
  sum = BlockSum(sum);
  const float r = static_cast<float>(1.0 / sqrt(sum / c + eps));
  for (int64_t j = threadIdx.x; j < c; j += kThreads) {
    Store(out, row + j, Load(inp, row + j) * r * weight[j]);
  }
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

// One block per row: dinp += r * (w dy - x * mean(w dy x) * r^2).
template <typename Dy, typename X, typename Dx>
__global__ void RmsNormBackwardRowsKernel(Dx* dinp, const Dy* dout, const X* inp,
                                          const float* weight, const float* rstd, int64_t c) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * c;
  double dot = 0;
  for (int64_t j = threadIdx.x; j < c; j += kThreads) {
    dot += static_cast<double>(weight[j]) * Load(dout, row + j) * Load(inp, row + j);
  }
  dot = BlockSum(dot);
  const float r = rstd[blockIdx.x];
  const float coefficient = static_cast<float>(dot / c) * r * r;
  for (int64_t j = threadIdx.x; j < c; j += kThreads) {
    const float dy = Load(dout, row + j), x = Load(inp, row + j);
    Store(dinp, row + j, Load(dinp, row + j) + r * (weight[j] * dy - x * coefficient));
  }
}

// Block b: columns [kThreads (b % column_blocks), + kThreads) of chunk b / column_blocks;
// partials[chunk, j] = the sum over the chunk's rows.
template <typename Dy, typename X>
__global__ void RmsNormWeightPartialsKernel(float* partials, const Dy* dout, const X* inp,
                                            const float* rstd, int64_t n, int64_t c,
                                            int64_t column_blocks) {
  const int64_t j = (blockIdx.x % column_blocks) * kThreads + threadIdx.x;
  const int64_t chunk = blockIdx.x / column_blocks;
  if (j >= c) return;
  const int64_t per_chunk = (n + kRmsNormChunks - 1) / kRmsNormChunks;
  const int64_t begin = chunk * per_chunk, end = min(n, begin + per_chunk);
  float sum = 0;
  for (int64_t i = begin; i < end; ++i)
    sum += Load(dout, i * c + j) * Load(inp, i * c + j) * rstd[i];
  partials[chunk * c + j] = sum;
}

__global__ void RmsNormWeightFoldKernel(float* dweight, const float* partials, int64_t c) {
  TITAN_GRID_STRIDE(j, c) {
    float sum = 0;
    for (int chunk = 0; chunk < kRmsNormChunks; ++chunk) sum += partials[chunk * c + j];
    dweight[j] += sum;
  }
}

// One thread per (b, t, head, pair).
template <typename T>
__global__ void RopeKernel(T* x, const float* cos_table, const float* sin_table, int64_t t,
                           int64_t heads, int64_t half, int64_t pairs, float direction) {
  TITAN_GRID_STRIDE(at, pairs) {
    const int64_t i = at % half, position = (at / (half * heads)) % t;
    const float c = cos_table[position * half + i];
    const float s = direction * sin_table[position * half + i];
    const float re = Load(x, 2 * at), im = Load(x, 2 * at + 1);
    Store(x, 2 * at, re * c - im * s);
    Store(x, 2 * at + 1, re * s + im * c);
  }
}

template <typename X, typename Y>
__global__ void SwiGluForwardKernel(Y* out, const X* a, const X* b, int64_t n) {
  TITAN_GRID_STRIDE(i, n) {
    const float ai = Load(a, i);
    Store(out, i, ai / (1.0f + expf(-ai)) * Load(b, i));
  }
}

template <typename Dy, typename X, typename Dx>
__global__ void SwiGluBackwardKernel(Dx* da, Dx* db, const Dy* dout, const X* a, const X* b,
                                     int64_t n) {
  TITAN_GRID_STRIDE(i, n) {
    const float ai = Load(a, i), bi = Load(b, i), dy = Load(dout, i);
    const float sigmoid = 1.0f / (1.0f + expf(-ai));
    const float silu = ai * sigmoid;
    Store(da, i, Load(da, i) + dy * bi * sigmoid * (1.0f + ai * (1.0f - sigmoid)));
    Store(db, i, Load(db, i) + dy * silu);
  }
}

template <typename Y>
__global__ void EmbeddingForwardKernel(Y* out, const int32_t* tokens, const float* table, int64_t n,
                                       int64_t c, int64_t first_row, int64_t rows) {
  TITAN_GRID_STRIDE(at, n * c) {
    const int64_t row = tokens[at / c] - first_row;
    Store(out, at, row >= 0 && row < rows ? table[row * c + at % c] : 0.0f);
  }
}

template <typename Launch>
cudaError_t RunRmsNormForward(Launch&& launch, ActivationOut out, float* rstd, ActivationIn inp,
                              const float* weight, int64_t n, int64_t c, double eps) {
  if (n == 0) return cudaSuccess;
  return WithElement(inp.bf16, [&](auto x) {
    return WithElement(out.bf16, [&](auto y) {
      using X = decltype(x);
      using Y = decltype(y);
      return launch(RmsNormForwardKernel<X, Y>, n, kThreads, size_t{0}, As(out, y), rstd,
                    As(inp, x), weight, c, eps);
    });
  });
}

// `partials`: kRmsNormChunks * c floats of scratch.
template <typename Launch>
cudaError_t RunRmsNormBackward(Launch&& launch, ActivationOut dinp, float* dweight,
                               ActivationIn dout, ActivationIn inp, const float* weight,
                               const float* rstd, int64_t n, int64_t c, float* partials) {
  if (n == 0 || c == 0) return cudaSuccess;
  return WithElement(dout.bf16, [&](auto dy) {
    return WithElement(inp.bf16, [&](auto x) {
      using Dy = decltype(dy);
      using X = decltype(x);
      cudaError_t error = WithElement(dinp.bf16, [&](auto dx) {
        return launch(RmsNormBackwardRowsKernel<Dy, X, decltype(dx)>, n, kThreads, size_t{0},
                      As(dinp, dx), As(dout, dy), As(inp, x), weight, rstd, c);
      });
      if (error != cudaSuccess) return error;
      const int64_t column_blocks = (c + kThreads - 1) / kThreads;
      error = launch(RmsNormWeightPartialsKernel<Dy, X>, column_blocks * kRmsNormChunks, kThreads,
                     size_t{0}, partials, As(dout, dy), As(inp, x), rstd, n, c, column_blocks);
      if (error != cudaSuccess) return error;
      return launch(RmsNormWeightFoldKernel, BlocksFor(c), kThreads, size_t{0}, dweight,
                    static_cast<const float*>(partials), c);
    });
  });
}

// x [b, t, heads, head_dim] rotated in place; direction -1 rotates back (the backward).
template <typename Launch>
cudaError_t RunRope(Launch&& launch, ActivationOut x, const float* cos, const float* sin, int64_t b,
                    int64_t t, int64_t heads, int64_t head_dim, float direction) {
  const int64_t half = head_dim / 2, pairs = b * t * heads * half;
  if (pairs == 0) return cudaSuccess;
  return WithElement(x.bf16, [&](auto e) {
    return launch(RopeKernel<decltype(e)>, BlocksFor(pairs), kThreads, size_t{0}, As(x, e), cos,
                  sin, t, heads, half, pairs, direction);
  });
}

// a and b of one element type.
template <typename Launch>
cudaError_t RunSwiGluForward(Launch&& launch, ActivationOut out, ActivationIn a, ActivationIn b,
                             int64_t n) {
  if (n == 0) return cudaSuccess;
  return WithElement(a.bf16, [&](auto x) {
    return WithElement(out.bf16, [&](auto y) {
      return launch(SwiGluForwardKernel<decltype(x), decltype(y)>, BlocksFor(n), kThreads,
                    size_t{0}, As(out, y), As(a, x), As(b, x), n);
    });
  });
}

// a and b of one element type, da and db of one.
template <typename Launch>
cudaError_t RunSwiGluBackward(Launch&& launch, ActivationOut da, ActivationOut db,
                              ActivationIn dout, ActivationIn a, ActivationIn b, int64_t n) {
  if (n == 0) return cudaSuccess;
  return WithElement(dout.bf16, [&](auto dy) {
    return WithElement(a.bf16, [&](auto x) {
      return WithElement(da.bf16, [&](auto dx) {
        return launch(SwiGluBackwardKernel<decltype(dy), decltype(x), decltype(dx)>, BlocksFor(n),
                      kThreads, size_t{0}, As(da, dx), As(db, dx), As(dout, dy), As(a, x), As(b, x),
                      n);
      });
    });
  });
}

// Table rows [first_row, first_row + rows); other tokens read zeros.
template <typename Launch>
cudaError_t RunEmbeddingForward(Launch&& launch, ActivationOut out, const int32_t* tokens,
                                const float* table, int64_t n, int64_t c, int64_t first_row,
                                int64_t rows) {
  if (n * c == 0) return cudaSuccess;
  return WithElement(out.bf16, [&](auto y) {
    return launch(EmbeddingForwardKernel<decltype(y)>, BlocksFor(n * c), kThreads, size_t{0},
                  As(out, y), tokens, table, n, c, first_row, rows);
  });
}

}  // namespace titan::cuda::layers

#endif  // TITAN_PLUGINS_DEVICE_CUDA_LAYER_KERNELS_CUH_
