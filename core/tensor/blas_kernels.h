// Which of OpenBLAS's kernels titan's f32 GEMMs run.
//
// OpenBLAS (a DYNAMIC_ARCH build, as Debian's) picks its kernels by the CPU's model number when it
// loads. For a model it does not know it falls back to its SSE3 (Prescott) kernels, 4-5x slower:
// Debian 12's 0.3.21 does so on Intel Emerald Rapids (family 6, model 207). OpenBLAS reads
// OPENBLAS_CORETYPE only when it loads, so a program linking titan_tensor checks the pick before
// main, and when it is narrower than the CPU's instruction sets it restarts itself (exec: same
// pid, arguments and environment) with OPENBLAS_CORETYPE naming the kernels for them: SkylakeX
// with AVX-512, Haswell with AVX2 and FMA, Sandybridge with AVX. An OPENBLAS_CORETYPE the user
// sets is left as it is.
#ifndef TITAN_CORE_TENSOR_BLAS_KERNELS_H_
#define TITAN_CORE_TENSOR_BLAS_KERNELS_H_

#include <string>

namespace titan {

// The kernels that run and why, for the log, e.g. "OpenBLAS 0.3.21 SkylakeX kernels
// (OPENBLAS_CORETYPE=SkylakeX, set by titan for AVX-512: OpenBLAS picked Prescott for this CPU,
// family 6 model 207)".
const std::string& BlasKernels();

// The OPENBLAS_CORETYPE name for a CPU with these instruction sets, empty when none is better
// than the SSE3 fallback; and how many instruction-set levels a kernel name stands for (0: SSE,
// 1: AVX, 2: AVX2 and FMA, 3: AVX-512; -1 for a name this table does not know).
std::string BlasCoreForIsa(bool avx512, bool avx2_fma, bool avx);
std::string BlasCoreForThisCpu();
int BlasCoreLevel(const std::string& core);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_BLAS_KERNELS_H_
