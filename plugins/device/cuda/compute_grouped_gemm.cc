// Grouped GEMMs of the CUDA compute through cuBLAS's cublasGemmGroupedBatchedEx: each of titan's
// groups is one cuBLAS group of one problem, turned column-major as compute_gemm.cc turns a GEMM
// (c^T = op(b)^T op(a)^T). cuBLAS reads the operand pointers from device memory and the sizes,
// leading dimensions and scales from the host.
#include <cstdio>
#include <vector>

#include "cuda_compute.h"
#include "cuda_status.h"

namespace titan::cuda {

absl::Status CudaCompute::BlasReady() {
  TITAN_RETURN_IF_ERROR(Ready());
  if (blas_handle_ != nullptr) return absl::OkStatus();
  TITAN_ASSIGN_OR_RETURN(blas_, LoadCublas());
  TITAN_RETURN_IF_ERROR(CheckCublas(blas_->Create_v2(&blas_handle_), "cublasCreate"));
  return CheckCublas(blas_->SetStream_v2(blas_handle_, stream_), "cublasSetStream");
}

absl::Status CudaCompute::RunGroupedGemm(std::span<const GemmGroup> groups, bool transpose_a,
                                         bool transpose_b, float alpha, float beta) {
  TITAN_RETURN_IF_ERROR(BlasReady());
  const bool bf16 = groups[0].a.dtype == DType::kBF16;
  if (bf16 && !grouped_bf16_) {
    for (const GemmGroup& g : groups) {
      TITAN_RETURN_IF_ERROR(RunGemm(g.a, transpose_a, g.b, transpose_b, alpha, beta, g.c));
    }
    return absl::OkStatus();
  }
  const size_t count = groups.size();
  std::vector<int64_t> m(count), n(count), k(count), lda(count), ldb(count), ldc(count);
  const std::vector<int64_t> one_each(count, 1);
  const std::vector<cublasOperation_t> op_a(count, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  const std::vector<cublasOperation_t> op_b(count, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  const std::vector<float> alphas(count, alpha), betas(count, beta);
  std::vector<const void*> pointers(3 * count);  // cuBLAS's A (titan's b), B (a), then C
  for (size_t g = 0; g < count; ++g) {
    const GemmGroup& group = groups[g];
    m[g] = transpose_b ? group.b.shape[0] : group.b.shape[1];
    n[g] = transpose_a ? group.a.shape[1] : group.a.shape[0];
    k[g] = transpose_a ? group.a.shape[0] : group.a.shape[1];
    lda[g] = group.b.shape[1];
    ldb[g] = group.a.shape[1];
    ldc[g] = group.c.shape[1];
    pointers[g] = group.b.data;
    pointers[count + g] = group.a.data;
    pointers[2 * count + g] = group.c.data;
  }
  const size_t bytes = pointers.size() * sizeof(void*);
  TITAN_ASSIGN_OR_RETURN(StreamScratch arrays, Scratch(bytes, "the grouped GEMM's pointers"));
  // From pageable memory: the copy stages `pointers` before it returns.
  TITAN_RETURN_IF_ERROR(Check(
      cudaMemcpyAsync(arrays.as<void*>(), pointers.data(), bytes, cudaMemcpyHostToDevice, stream_),
      "cudaMemcpyAsync"));
  const auto* const* a_array = arrays.as<const void*>();
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      !bf16 && allow_tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasStatus_t status = blas_->GemmGroupedBatchedEx_64(
      blas_handle_, op_a.data(), op_b.data(), m.data(), n.data(), k.data(), alphas.data(), a_array,
      type, lda.data(), a_array + count, type, ldb.data(), betas.data(),
      arrays.as<void*>() + 2 * count, CUDA_R_32F, ldc.data(), static_cast<int64_t>(count),
      one_each.data(), compute);
  if (bf16 && (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE)) {
    // bf16 operands into f32 are not among the type mixes every cuBLAS groups (it may say either):
    // run the groups one by one through cuBLASLt from now on, and say so once.
    grouped_bf16_ = false;
    std::fprintf(stderr,
                 "cuda: cuBLAS's grouped GEMM does not take bf16 operands into f32 (%s); grouped "
                 "bf16 GEMMs run one group at a time through cuBLASLt\n",
                 CublasStatusText(status).c_str());
    return RunGroupedGemm(groups, transpose_a, transpose_b, alpha, beta);
  }
  return CheckCublas(status, "cublasGemmGroupedBatchedEx");
}

}  // namespace titan::cuda
