// The CPU's bf16 GEMM: bf16 operands, f32 products and sums, f32 result. On CPUs with bf16
// instructions (AVX512_BF16, AMX) oneDNN's matmul runs it natively; elsewhere the operands are
// widened to f32 (exactly) and multiplied by sgemm, which gives the same numerics, slower.
#ifndef TITAN_CORE_TENSOR_BF16_GEMM_H_
#define TITAN_CORE_TENSOR_BF16_GEMM_H_

#include <cstdint>
#include <string>

#include "titan/status.h"

namespace titan {

// Row-major c[m, n] = alpha * op(a) . op(b) + beta * c; a is [m, k] ([k, m] when transposed),
// b is [k, n] ([n, k] when transposed).
absl::Status Bf16Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                      float alpha, const uint16_t* a, const uint16_t* b, float beta, float* c);

// The emulation alone, whatever the CPU: tests compare it with oneDNN's path in one process.
absl::Status EmulatedBf16Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                              float alpha, const uint16_t* a, const uint16_t* b, float beta,
                              float* c);

// Which path runs, for the log: "by oneDNN (<its kernel>)" or "emulated (...why...)".
// TITAN_BF16_GEMM=emulate forces the emulation (tests compare the two).
std::string Bf16GemmPath();

// TITAN_BF16_GEMM unset, empty or "emulate" is fine; any other value is an error naming it
// (Bf16Gemm returns it too, so that a misspelling never silently picks the other path).
absl::Status CheckBf16GemmSetting();

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_BF16_GEMM_H_
