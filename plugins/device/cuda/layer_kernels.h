// The model's layer kernels on raw device pointers (RMSNorm, RoPE, SwiGLU, embedding), each the
// arithmetic of the CPU backend's (core/tensor/*.cc) with its sums in a fixed order. Activation
// operands are f32 or bf16 (activation.h): read into f32, written rounded once.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_LAYER_KERNELS_H_
#define TITAN_PLUGINS_DEVICE_CUDA_LAYER_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "activation.h"

namespace titan::cuda {

// Rows of inp [n, c]; sums of squares in f64.
cudaError_t LaunchRmsNormForward(ActivationOut out, float* rstd, ActivationIn inp,
                                 const float* weight, int64_t n, int64_t c, double eps,
                                 cudaStream_t stream);
// dinp accumulates by rows; dweight accumulates from kRmsNormChunks partial sums per column
// (`partials`, kRmsNormChunks * c floats of scratch) added in chunk order.
constexpr int kRmsNormChunks = 64;
cudaError_t LaunchRmsNormBackward(ActivationOut dinp, float* dweight, ActivationIn dout,
                                  ActivationIn inp, const float* weight, const float* rstd,
                                  int64_t n, int64_t c, float* partials, cudaStream_t stream);

// cos, sin [seq_len, half] from the per-pair frequencies `freq` [half] (the host computes them
// as the CPU does): angle = (position_offset + p) * freq in f32, cos and sin in f64.
cudaError_t LaunchRopeTable(float* cos, float* sin, const float* freq, int64_t seq_len,
                            int64_t half, int64_t position_offset, cudaStream_t stream);
// x [b, t, heads, head_dim] rotated in place; direction -1 rotates back (the backward).
cudaError_t LaunchRope(ActivationOut x, const float* cos, const float* sin, int64_t b, int64_t t,
                       int64_t heads, int64_t head_dim, float direction, cudaStream_t stream);

// a and b of one dtype; da and db of one.
cudaError_t LaunchSwiGluForward(ActivationOut out, ActivationIn a, ActivationIn b, int64_t n,
                                cudaStream_t stream);
cudaError_t LaunchSwiGluBackward(ActivationOut da, ActivationOut db, ActivationIn dout,
                                 ActivationIn a, ActivationIn b, int64_t n, cudaStream_t stream);

// Table rows [first_row, first_row + rows); other tokens read zeros and add no gradient.
cudaError_t LaunchEmbeddingForward(ActivationOut out, const int32_t* tokens, const float* table,
                                   int64_t n, int64_t c, int64_t first_row, int64_t rows,
                                   cudaStream_t stream);
// Each (row, column) of the table has one owner that adds the tokens in order: no atomics, and
// the sums are the CPU's, bit for bit; the work is split to fill the GPU (embedding_kernels.cuh).
cudaError_t LaunchEmbeddingBackward(float* dtable, ActivationIn dout, const int32_t* tokens,
                                    int64_t n, int64_t c, int64_t first_row, int64_t rows,
                                    cudaStream_t stream);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_LAYER_KERNELS_H_
