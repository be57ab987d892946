#include "gemm_plan.h"

#include "absl/strings/str_cat.h"
#include "cuda_status.h"

namespace titan::cuda {
namespace {

template <typename T>
absl::Status SetOp(const CublasLt& lt, cublasLtMatmulDesc_t desc,
                   cublasLtMatmulDescAttributes_t attribute, const T& value) {
  return CheckCublas(lt.MatmulDescSetAttribute(desc, attribute, &value, sizeof(value)),
                     "cublasLtMatmulDescSetAttribute");
}

template <typename T>
absl::Status SetPreference(const CublasLt& lt, cublasLtMatmulPreference_t preference,
                           cublasLtMatmulPreferenceAttributes_t attribute, T value) {
  return CheckCublas(lt.MatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)),
                     "cublasLtMatmulPreferenceSetAttribute");
}

using Layout = decltype(GemmPlan::a);
using Preference =
    std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, LtDestroy<cublasLtMatmulPreference_t>>;

absl::StatusOr<Layout> MakeLayout(const CublasLt& lt, cudaDataType_t type, int64_t rows,
                                  int64_t columns, int64_t leading) {
  cublasLtMatrixLayout_t layout = nullptr;
  TITAN_RETURN_IF_ERROR(
      CheckCublas(lt.MatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
                                        static_cast<uint64_t>(columns), leading),
                  "cublasLtMatrixLayoutCreate"));
  return Layout(layout, {lt.MatrixLayoutDestroy});
}

cublasOperation_t OpOf(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

absl::Status SetPlanScales(const CublasLt& lt, GemmPlan& plan, const LtMatmul& call) {
  if (call.a.scale == nullptr) return absl::OkStatus();
  TITAN_RETURN_IF_ERROR(
      SetOp(lt, plan.desc.get(), CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, call.a.scale));
  return SetOp(lt, plan.desc.get(), CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, call.b.scale);
}

absl::StatusOr<GemmPlan> BuildGemmPlan(const CublasLt& lt, cublasLtHandle_t handle,
                                       const LtMatmul& call, size_t workspace_bytes,
                                       const char* kernel, const std::string& device) {
  const GemmPlanKey key = PlanKeyOf(call);
  GemmPlan plan;
  cublasLtMatmulDesc_t raw_desc = nullptr;
  TITAN_RETURN_IF_ERROR(CheckCublas(lt.MatmulDescCreate(&raw_desc, call.compute, CUDA_R_32F),
                                    "cublasLtMatmulDescCreate"));
  plan.desc = {raw_desc, {lt.MatmulDescDestroy}};
  TITAN_RETURN_IF_ERROR(SetOp(lt, raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, OpOf(call.a.transpose)));
  TITAN_RETURN_IF_ERROR(SetOp(lt, raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, OpOf(call.b.transpose)));
  TITAN_RETURN_IF_ERROR(SetOp(lt, raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                              static_cast<cublasLtEpilogue_t>(key.epilogue)));
  TITAN_RETURN_IF_ERROR(SetPlanScales(lt, plan, call));
  if (call.outer_vector_scales) {
#if CUBLAS_VERSION >= 120900  // the outer-vector scale mode came with cuBLAS 12.9
    const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    TITAN_RETURN_IF_ERROR(SetOp(lt, raw_desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, mode));
    TITAN_RETURN_IF_ERROR(SetOp(lt, raw_desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, mode));
#else
    return absl::UnimplementedError(
        absl::StrCat(kernel, ": this cuBLASLt has no outer-vector scale mode"));
#endif
  }
  TITAN_ASSIGN_OR_RETURN(plan.a,
                         MakeLayout(lt, call.a.type, call.a.rows, call.a.columns, call.a.leading));
  TITAN_ASSIGN_OR_RETURN(plan.b,
                         MakeLayout(lt, call.b.type, call.b.rows, call.b.columns, call.b.leading));
  TITAN_ASSIGN_OR_RETURN(plan.c, MakeLayout(lt, static_cast<cudaDataType_t>(key.c_type), key.c_rows,
                                            key.c_columns, key.c_leading));
  cublasLtMatmulPreference_t raw_preference = nullptr;
  TITAN_RETURN_IF_ERROR(
      CheckCublas(lt.MatmulPreferenceCreate(&raw_preference), "cublasLtMatmulPreferenceCreate"));
  Preference preference(raw_preference, {lt.MatmulPreferenceDestroy});
  TITAN_RETURN_IF_ERROR(SetPreference(lt, raw_preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                      uint64_t{workspace_bytes}));
  TITAN_RETURN_IF_ERROR(SetPreference(lt, raw_preference,
                                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.a.alignment));
  TITAN_RETURN_IF_ERROR(SetPreference(lt, raw_preference,
                                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.b.alignment));
  TITAN_RETURN_IF_ERROR(SetPreference(lt, raw_preference,
                                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.c_alignment));
  TITAN_RETURN_IF_ERROR(SetPreference(lt, raw_preference,
                                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.c_alignment));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t asked =
      lt.MatmulAlgoGetHeuristic(handle, raw_desc, plan.a.get(), plan.b.get(), plan.c.get(),
                                plan.c.get(), raw_preference, 1, &heuristic, &found);
  if (asked == CUBLAS_STATUS_NOT_SUPPORTED || (asked == CUBLAS_STATUS_SUCCESS && found == 0)) {
    return absl::UnimplementedError(absl::StrCat(
        kernel, ": cuBLASLt has no algorithm for [", call.c_columns, ", ", call.c_rows,
        "] from operands of k = ", call.a.transpose ? call.a.rows : call.a.columns, " on ", device,
        asked == CUBLAS_STATUS_SUCCESS ? "" : absl::StrCat(" (", CublasStatusText(asked), ")")));
  }
  TITAN_RETURN_IF_ERROR(CheckCublas(asked, "cublasLtMatmulAlgoGetHeuristic"));
  plan.algo = heuristic.algo;
  return plan;
}

}  // namespace titan::cuda
