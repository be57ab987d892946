#include "cublaslt_library.h"

#include <gtest/gtest.h>

namespace titan::cuda {
namespace {

// cuBLASLt comes with the toolkit this plugin is built against, GPU or not: every function titan
// calls must bind, and its status texts must be cuBLAS's own.
TEST(CublasLtLibrary, LoadsEveryFunctionTitanCalls) {
  absl::StatusOr<const CublasLt*> lt = LoadCublasLt();
  ASSERT_TRUE(lt.ok()) << lt.status();
#define TITAN_EXPECT_BOUND(name) EXPECT_NE((*lt)->name, nullptr) << #name;
  TITAN_CUBLASLT_FUNCTIONS(TITAN_EXPECT_BOUND)
#undef TITAN_EXPECT_BOUND
  EXPECT_EQ((*lt)->file.front(), '/') << (*lt)->file;
  EXPECT_NE((*lt)->file.find("libcublasLt.so."), std::string::npos) << (*lt)->file;
  EXPECT_EQ(CublasStatusText(CUBLAS_STATUS_NOT_SUPPORTED).rfind("CUBLAS_STATUS_NOT_SUPPORTED: ", 0),
            0u)
      << CublasStatusText(CUBLAS_STATUS_NOT_SUPPORTED);
}

// cuBLAS too, for its grouped GEMM (cublasGemmGroupedBatchedEx, new in CUDA 12.5): the library the
// toolkit ships must have every function titan binds.
TEST(CublasLibrary, LoadsEveryFunctionTitanCalls) {
  absl::StatusOr<const Cublas*> blas = LoadCublas();
  ASSERT_TRUE(blas.ok()) << blas.status();
#define TITAN_EXPECT_BOUND(name) EXPECT_NE((*blas)->name, nullptr) << #name;
  TITAN_CUBLAS_FUNCTIONS(TITAN_EXPECT_BOUND)
#undef TITAN_EXPECT_BOUND
  EXPECT_NE((*blas)->file.find("libcublas.so."), std::string::npos) << (*blas)->file;
}

}  // namespace
}  // namespace titan::cuda
