// Causal self-attention with bf16 matmuls, for bf16 runs on the CPU: the f32 kernel's tiles
// (core/tensor/attention.h, same shapes, layouts and saved lse) with both GEMMs of each tile run by
// Bf16Gemm. q, k and v (and dout in the backward) are rounded to bf16 (nearest even), once per
// call into head-major copies that the tiles read; the scores are f32 sums of exact bf16
// products, the softmax is f32, and each tile's probabilities (and ds in the backward) are rounded
// to bf16 for the second GEMMs, which sum in f32 and write f32: what PyTorch's bf16 attention
// under autocast computes (bf16 operands, f32 accumulation).
//
// Against the f32 kernel each rounding is a relative error of at most u = 2^-9 in an operand;
// they enter the outputs at first order with random signs. core/tensor/attention_bf16_test.cc
// holds the kernel to: out and each gradient within 2.5e-2 of the tensor's largest magnitude on
// unit-normal inputs (measured at most 1e-2); each row's lse within (2u + u^2) scale
// max_j sum_d |q_d k_jd| of the f32 one (how far rounding q and k can move a score); oneDNN's
// path and the emulation within 2e-3 (measured 8e-6).
#ifndef TITAN_CORE_TENSOR_ATTENTION_BF16_H_
#define TITAN_CORE_TENSOR_ATTENTION_BF16_H_

#include <cstdint>

#include "core/tensor/attention.h"
#include "titan/status.h"

namespace titan {

// The GEMM both kernels run: Bf16Gemm's signature (core/tensor/bf16_gemm.h).
using Bf16GemmFunction = absl::Status (*)(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                                          int64_t k, float alpha, const uint16_t* a,
                                          const uint16_t* b, float beta, float* c);

// As AttentionForward<float>: out [b, t, heads, hd] and lse [b, heads, t] written in f32.
// `gemm` is Bf16Gemm unless a test passes EmulatedBf16Gemm.
absl::Status AttentionForwardBf16(float* out, float* lse, const float* q, const float* k,
                                  const float* v, const AttentionShape& shape,
                                  Bf16GemmFunction gemm = nullptr);

// As AttentionBackward<float>: dq, dk and dv accumulate in f32; each task owns one kv head of one
// batch row, so the result is the same for any thread count.
absl::Status AttentionBackwardBf16(float* dq, float* dk, float* dv, const float* dout,
                                   const float* q, const float* k, const float* v, const float* out,
                                   const float* lse, const AttentionShape& shape,
                                   Bf16GemmFunction gemm = nullptr);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_ATTENTION_BF16_H_
