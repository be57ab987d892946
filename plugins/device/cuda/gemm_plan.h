// A cuBLASLt plan: the matmul descriptor, the three layouts and the algorithm the heuristic chose
// for one GemmPlanKey, built once (gemm_plan_cache.h) and run for every call of that problem.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_GEMM_PLAN_H_
#define TITAN_PLUGINS_DEVICE_CUDA_GEMM_PLAN_H_

#include <cublasLt.h>

#include <cstddef>
#include <memory>
#include <string>

#include "cublaslt_library.h"
#include "cuda_compute.h"
#include "gemm_plan_cache.h"

namespace titan::cuda {

// Destroys a cuBLASLt object through the loaded library's function.
template <typename Handle>
struct LtDestroy {
  cublasStatus_t (*destroy)(Handle);
  void operator()(Handle handle) const { destroy(handle); }
};

struct GemmPlan {
  std::unique_ptr<cublasLtMatmulDescOpaque_t, LtDestroy<cublasLtMatmulDesc_t>> desc;
  std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LtDestroy<cublasLtMatrixLayout_t>> a, b, c;
  cublasLtMatmulAlgo_t algo{};
};

// The CudaCompute's plans: at most this many problems, far more than a model's GEMMs.
constexpr size_t kGemmPlanCapacity = 1024;
struct GemmPlans {
  PlanCache<GemmPlan> cache{kGemmPlanCapacity};
};

// The key of `call`: its shapes, types, transposes, the alignment of its pointers, whether its
// operands carry scales, and the (default) epilogue. titan's GEMMs are the linear layers of
// models without biases, and SwiGLU gates one GEMM's output by another's, which no cuBLASLt
// epilogue does: no call site has a bias or activation an epilogue would save a pass for.
inline GemmPlanKey PlanKeyOf(const LtMatmul& call) {
  const auto operand = [](const LtOperand& x) {
    return GemmPlanOperand{.type = static_cast<int32_t>(x.type),
                           .rows = x.rows,
                           .columns = x.columns,
                           .leading = x.leading,
                           .transpose = x.transpose,
                           .alignment = AlignmentOf(x.data),
                           .scaled = x.scale != nullptr};
  };
  return GemmPlanKey{.a = operand(call.a),
                     .b = operand(call.b),
                     .c_type = static_cast<int32_t>(call.c_type),
                     .c_rows = call.c_rows,
                     .c_columns = call.c_columns,
                     .c_leading = call.c_rows,
                     .c_alignment = AlignmentOf(call.c),
                     .compute = static_cast<int32_t>(call.compute),
                     .outer_vector_scales = call.outer_vector_scales,
                     .epilogue = static_cast<int32_t>(CUBLASLT_EPILOGUE_DEFAULT)};
}

// Builds the plan of `call` (PlanKeyOf(call) is its key) and asks the heuristic for its algorithm
// with `workspace_bytes` of workspace. Unimplemented when cuBLASLt has no algorithm for it or
// does not support it, so that the cache remembers the refusal; `kernel` and `device` name the
// caller and the GPU in the messages.
absl::StatusOr<GemmPlan> BuildGemmPlan(const CublasLt& lt, cublasLtHandle_t handle,
                                       const LtMatmul& call, size_t workspace_bytes,
                                       const char* kernel, const std::string& device);

// Points the plan's descriptor at this call's scales (a plan is shared by calls whose scale
// tensors differ); nothing to do for unscaled operands.
absl::Status SetPlanScales(const CublasLt& lt, GemmPlan& plan, const LtMatmul& call);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_GEMM_PLAN_H_
