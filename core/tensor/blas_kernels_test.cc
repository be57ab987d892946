#include "core/tensor/blas_kernels.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <string>

namespace titan {
namespace {

TEST(BlasKernels, TheWidestInstructionSetNamesTheKernels) {
  EXPECT_EQ(BlasCoreForIsa(true, true, true), "SkylakeX");
  EXPECT_EQ(BlasCoreForIsa(false, true, true), "Haswell");
  EXPECT_EQ(BlasCoreForIsa(false, false, true), "Sandybridge");
  EXPECT_EQ(BlasCoreForIsa(false, false, false), "");
}

TEST(BlasKernels, LevelsOrderTheKernelsByInstructionSet) {
  EXPECT_EQ(BlasCoreLevel("Prescott"), 0);
  EXPECT_EQ(BlasCoreLevel("Sandybridge"), 1);
  EXPECT_EQ(BlasCoreLevel("Haswell"), 2);
  EXPECT_EQ(BlasCoreLevel("Zen"), 2);
  EXPECT_EQ(BlasCoreLevel("SkylakeX"), 3);
  EXPECT_EQ(BlasCoreLevel("Cooperlake"), 3);
  EXPECT_EQ(BlasCoreLevel("a future core"), -1);
}

// The GEMMs run kernels as wide as the CPU allows, whatever OpenBLAS picked when it loaded (on an
// Emerald Rapids, Debian's OpenBLAS picks Prescott), unless the user named the kernels.
TEST(BlasKernels, TheGemmsRunKernelsForThisCpusInstructionSets) {
  const std::string& chosen = BlasKernels();
  std::cout << "f32 GEMM by " << chosen << "\n";
  RecordProperty("blas_kernels", chosen);
  const std::string running = openblas_get_corename();
  EXPECT_NE(chosen.find(running), std::string::npos) << chosen;
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  if (user != nullptr && chosen.find("(OPENBLAS_CORETYPE=") != std::string::npos) return;
  const std::string wanted = BlasCoreForThisCpu();
  if (wanted.empty() || BlasCoreLevel(running) < 0) return;  // nothing better, or a newer name
  EXPECT_GE(BlasCoreLevel(running), BlasCoreLevel(wanted)) << chosen;

  // And they still multiply: [2 x 3] . [3 x 2].
  const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
  float c[4] = {};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
  EXPECT_FLOAT_EQ(c[0], 58);
  EXPECT_FLOAT_EQ(c[1], 64);
  EXPECT_FLOAT_EQ(c[2], 139);
  EXPECT_FLOAT_EQ(c[3], 154);
}

}  // namespace
}  // namespace titan
