// GEMMs of the CUDA compute through cuBLASLt. titan's matrices are row-major and cuBLASLt's
// column-major: a row-major [r, c] matrix is a column-major [c, r] one, so c = op(a) op(b) is
// computed as c^T = op(b)^T op(a)^T with b in cuBLASLt's A place and a in its B place.
#include <memory>

#include "absl/strings/str_cat.h"
#include "cuda_compute.h"
#include "cuda_status.h"
#include "elementwise_kernels.h"
#include "fill_kernel.h"
#include "operands.h"

namespace titan::cuda {
namespace {

// Destroys a cuBLASLt object through the loaded library's function.
template <typename Handle>
struct LtDestroy {
  cublasStatus_t (*destroy)(Handle);
  void operator()(Handle handle) const { destroy(handle); }
};
using OpDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, LtDestroy<cublasLtMatmulDesc_t>>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LtDestroy<cublasLtMatrixLayout_t>>;
using Preference =
    std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, LtDestroy<cublasLtMatmulPreference_t>>;

// The largest power of two (up to 256) the address is a multiple of: cuBLASLt otherwise assumes
// 256-byte alignment, which views into the middle of an arena do not have.
uint32_t AlignmentOf(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

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

absl::Status CudaCompute::RunLtMatmul(const char* kernel, const LtMatmul& call) {
  const CublasLt& lt = *cublas_;
  cublasLtMatmulDesc_t raw_desc = nullptr;
  TITAN_RETURN_IF_ERROR(CheckCublas(lt.MatmulDescCreate(&raw_desc, call.compute, CUDA_R_32F),
                                    "cublasLtMatmulDescCreate"));
  OpDesc desc(raw_desc, {lt.MatmulDescDestroy});
  TITAN_RETURN_IF_ERROR(SetOp(lt, raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, OpOf(call.a.transpose)));
  TITAN_RETURN_IF_ERROR(SetOp(lt, raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, OpOf(call.b.transpose)));
  if (call.a.scale != nullptr) {
    TITAN_RETURN_IF_ERROR(SetOp(lt, raw_desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, call.a.scale));
    TITAN_RETURN_IF_ERROR(SetOp(lt, raw_desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, call.b.scale));
  }
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
  TITAN_ASSIGN_OR_RETURN(Layout a,
                         MakeLayout(lt, call.a.type, call.a.rows, call.a.columns, call.a.leading));
  TITAN_ASSIGN_OR_RETURN(Layout b,
                         MakeLayout(lt, call.b.type, call.b.rows, call.b.columns, call.b.leading));
  TITAN_ASSIGN_OR_RETURN(Layout c,
                         MakeLayout(lt, CUDA_R_32F, call.c_rows, call.c_columns, call.c_rows));
  cublasLtMatmulPreference_t raw_preference = nullptr;
  TITAN_RETURN_IF_ERROR(
      CheckCublas(lt.MatmulPreferenceCreate(&raw_preference), "cublasLtMatmulPreferenceCreate"));
  Preference preference(raw_preference, {lt.MatmulPreferenceDestroy});
  TITAN_RETURN_IF_ERROR(SetPreference(lt, raw_preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                      uint64_t{kWorkspaceBytes}));
  TITAN_RETURN_IF_ERROR(SetPreference(
      lt, raw_preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, AlignmentOf(call.a.data)));
  TITAN_RETURN_IF_ERROR(SetPreference(
      lt, raw_preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, AlignmentOf(call.b.data)));
  TITAN_RETURN_IF_ERROR(SetPreference(
      lt, raw_preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, AlignmentOf(call.c)));
  TITAN_RETURN_IF_ERROR(SetPreference(
      lt, raw_preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, AlignmentOf(call.c)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  TITAN_RETURN_IF_ERROR(
      CheckCublas(lt.MatmulAlgoGetHeuristic(lt_, raw_desc, a.get(), b.get(), c.get(), c.get(),
                                            raw_preference, 1, &heuristic, &found),
                  "cublasLtMatmulAlgoGetHeuristic"));
  if (found == 0) {
    return absl::UnimplementedError(absl::StrCat(
        kernel, ": cuBLASLt has no algorithm for [", call.c_columns, ", ", call.c_rows,
        "] from operands of k = ", call.a.transpose ? call.a.rows : call.a.columns, " on ", name_));
  }
  return CheckCublas(lt.Matmul(lt_, raw_desc, &call.alpha, call.a.data, a.get(), call.b.data,
                               b.get(), &call.beta, call.c, c.get(), call.c, c.get(),
                               &heuristic.algo, workspace_, uint64_t{kWorkspaceBytes}, stream_),
                     "cublasLtMatmul");
}

absl::Status CudaCompute::RunGemm(const TensorView& a, bool transpose_a, const TensorView& b,
                                  bool transpose_b, float alpha, float beta, TensorView c) {
  const int64_t m = transpose_a ? a.shape[1] : a.shape[0];
  const int64_t k = transpose_a ? a.shape[0] : a.shape[1];
  const int64_t n = transpose_b ? b.shape[0] : b.shape[1];
  TITAN_RETURN_IF_ERROR(Ready());
  if (m == 0 || n == 0) return absl::OkStatus();
  if (k == 0) {  // no products: c = beta c (cuBLASLt takes no empty k)
    if (beta == 0.0f) {
      return Check(LaunchFillF32(F(c), static_cast<size_t>(m * n), 0.0f, stream_),
                   "Gemm kernel launch");
    }
    return Check(LaunchScale(F(c), m * n, beta, stream_), "Gemm kernel launch");
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
  };
  return RunLtMatmul("Gemm", call);
}

}  // namespace titan::cuda
