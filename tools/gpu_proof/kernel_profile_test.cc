#include "tools/gpu_proof/kernel_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace titan::gpu_proof {
namespace {

using ::testing::HasSubstr;

TEST(KernelClass, ByTheKernelsName) {
  EXPECT_EQ(KernelClass("Gemm"), "GEMMs");
  EXPECT_EQ(KernelClass("Float8Gemm"), "GEMMs");
  EXPECT_EQ(KernelClass("GroupedGemm"), "GEMMs");
  EXPECT_EQ(KernelClass("Float8Quantize"), "Float8 casts");
  EXPECT_EQ(KernelClass("AttentionBackward"), "attention");
  EXPECT_EQ(KernelClass("RmsNormForward"), "norms");
  EXPECT_EQ(KernelClass("CrossEntropyRowMax"), "loss");
  EXPECT_EQ(KernelClass("AdamStep"), "optimizer");
  EXPECT_EQ(KernelClass("SumOfSquares"), "optimizer");
  EXPECT_EQ(KernelClass("Cast"), "casts");
  EXPECT_EQ(KernelClass("CopyToHost"), "copies");
  EXPECT_EQ(KernelClass("Accumulate"), "elementwise");
}

// A step of 10 ms: two GEMMs (3 ms), an attention kernel (4 ms), a cast (1 ms); a module span and
// an instant event that are not kernels.
constexpr char kTrace[] = R"({"traceEvents": [
  {"ph": "X", "cat": "step", "name": "step 3", "ts": 0, "dur": 10000},
  {"ph": "X", "cat": "module", "name": "layers.0.forward", "ts": 0, "dur": 9000},
  {"ph": "X", "cat": "kernel", "name": "Gemm", "ts": 10, "dur": 1000},
  {"ph": "X", "cat": "kernel", "name": "Gemm", "ts": 1100, "dur": 2000},
  {"ph": "X", "cat": "kernel", "name": "AttentionForward", "ts": 3200, "dur": 4000},
  {"ph": "X", "cat": "kernel", "name": "Cast", "ts": 7300, "dur": 1000},
  {"ph": "i", "cat": "kernel", "name": "marker", "ts": 8000}
]})";

TEST(KernelProfile, SumsTheKernelSpansByClassMostTimeFirst) {
  absl::StatusOr<Json> profile = KernelProfile(kTrace);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_DOUBLE_EQ((*profile)["step_ms"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ((*profile)["kernels_ms"].get<double>(), 8.0);
  const Json& classes = (*profile)["classes"];
  ASSERT_EQ(classes.size(), 3u);
  EXPECT_EQ(classes[0]["class"], "attention");
  EXPECT_DOUBLE_EQ(classes[0]["percent_of_step"].get<double>(), 40.0);
  EXPECT_EQ(classes[1]["class"], "GEMMs");
  EXPECT_EQ(classes[1]["calls"], 2);
  EXPECT_DOUBLE_EQ(classes[1]["ms"].get<double>(), 3.0);
  EXPECT_EQ(classes[2]["class"], "casts");
  EXPECT_EQ((*profile)["top_kernels"][0]["kernel"], "AttentionForward");
  const std::string table = FormatKernelProfile(*profile);
  EXPECT_THAT(table, HasSubstr("one profiled step: 10.0 ms, of which kernels 8.0 ms"));
  EXPECT_THAT(table, HasSubstr("  attention            4.00       1      40.0\n"));
}

TEST(KernelProfile, RefusesWhatIsNoTraceOrHasNoKernel) {
  EXPECT_EQ(KernelProfile("not json").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KernelProfile("{}").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      KernelProfile(R"({"traceEvents": [{"ph": "X", "cat": "step", "dur": 5}]})").status().code(),
      absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace titan::gpu_proof
