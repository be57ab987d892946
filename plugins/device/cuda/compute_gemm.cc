// GEMMs of the CUDA compute through cuBLASLt. titan's matrices are row-major and cuBLASLt's
// column-major: a row-major [r, c] matrix is a column-major [c, r] one, so c = op(a) op(b) is
// computed as c^T = op(b)^T op(a)^T with b in cuBLASLt's A place and a in its B place.
#include <mutex>

#include "absl/strings/str_cat.h"
#include "cuda_compute.h"
#include "cuda_status.h"
#include "elementwise_kernels.h"
#include "fill_kernel.h"
#include "gemm_plan.h"
#include "operands.h"

namespace titan::cuda {

// The plan of the call's problem, built on first use (gemm_plan.h), then only its scale pointers
// set and the matmul enqueued.
absl::Status CudaCompute::RunLtMatmul(const char* kernel, const LtMatmul& call) {
  const CublasLt& lt = *cublas_;
  std::lock_guard<std::mutex> held(gemm_plans_->cache.lock());
  TITAN_ASSIGN_OR_RETURN(GemmPlan * plan, gemm_plans_->cache.FindOrBuild(PlanKeyOf(call), [&] {
    return BuildGemmPlan(lt, lt_, call, kWorkspaceBytes, kernel, name_);
  }));
  TITAN_RETURN_IF_ERROR(SetPlanScales(lt, *plan, call));
  return CheckCublas(
      lt.Matmul(lt_, plan->desc.get(), &call.alpha, call.a.data, plan->a.get(), call.b.data,
                plan->b.get(), &call.beta, call.c, plan->c.get(), call.c, plan->c.get(),
                &plan->algo, workspace_, uint64_t{kWorkspaceBytes}, stream_),
      "cublasLtMatmul");
}

absl::Status CudaCompute::RunGemm(const TensorView& a, bool transpose_a, const TensorView& b,
                                  bool transpose_b, float alpha, float beta, TensorView c) {
  const int64_t m = transpose_a ? a.shape[1] : a.shape[0];
  const int64_t k = transpose_a ? a.shape[0] : a.shape[1];
  const int64_t n = transpose_b ? b.shape[0] : b.shape[1];
  TITAN_RETURN_IF_ERROR(Ready());
  if (m == 0 || n == 0) return absl::OkStatus();
  const bool bf16_c = c.dtype == DType::kBF16;
  if (k == 0) {  // no products: c = beta c (cuBLASLt takes no empty k)
    if (beta == 0.0f) {
      return Check(bf16_c ? LaunchFillBf16(c.data, static_cast<size_t>(m * n), 0.0f, stream_)
                          : LaunchFillF32(F(c), static_cast<size_t>(m * n), 0.0f, stream_),
                   "Gemm kernel launch");
    }
    return Check(LaunchScale(Out(c), m * n, beta, stream_), "Gemm kernel launch");
  }
  const bool bf16 = a.dtype == DType::kBF16;
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  LtMatmul call{
      .a = {b.data, type, b.shape[1], b.shape[0], b.shape[1], transpose_b, nullptr},
      .b = {a.data, type, a.shape[1], a.shape[0], a.shape[1], transpose_a, nullptr},
      .c = c.data,
      .c_rows = n,
      .c_columns = m,
      .compute = !bf16 && allow_tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
      .alpha = alpha,
      .beta = beta,
      .outer_vector_scales = false,
      .c_type = bf16_c ? CUDA_R_16BF : CUDA_R_32F,
  };
  return RunLtMatmul("Gemm", call);
}

}  // namespace titan::cuda
