#include "tools/gpu_proof/throughput.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace titan::gpu_proof {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

bool Has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

TEST(PeakTflops, ByTheDevicesName) {
  EXPECT_EQ(PeakTflops("NVIDIA H200"), 989.0);
  EXPECT_EQ(PeakTflops("NVIDIA H100 80GB HBM3"), 989.0);
  EXPECT_EQ(PeakTflops("NVIDIA A100-SXM4-80GB"), 312.0);
  EXPECT_FALSE(PeakTflops("Tesla T4").has_value());
}

TEST(MeasuredCeiling, FromTitanRunsPeakLineWhenItMeasured) {
  EXPECT_EQ(MeasuredCeiling("[2026-12-04 11:52:34.461] [info] [rank 0 step -] [metrics] peak "
                            "712.250 TFLOP/s per rank, for MFU: measured: the best of 8 bf16 "
                            "4096^3 GEMMs on the device after two untimed\n"),
            712.25);
  EXPECT_FALSE(MeasuredCeiling("[metrics] peak 989.000 TFLOP/s per rank, for MFU: "
                               "metrics.peak_tflops\n")
                   .has_value());
  EXPECT_FALSE(MeasuredCeiling("").has_value());
}

TEST(ThroughputRuns, ThreeShapesInBf16AndFloat8) {
  Bundle bundle{"/b"};
  std::vector<ThroughputRun> runs = ThroughputRuns(bundle);
  ASSERT_EQ(runs.size(), 8u);
  EXPECT_EQ(runs[0].flavor, "debugmodel");
  EXPECT_EQ(runs[0].precision, "bf16");
  EXPECT_FALSE(Has(runs[0].overrides, "--model.converters=float8"));
  EXPECT_EQ(runs[1].precision, "float8 tensorwise");
  EXPECT_TRUE(Has(runs[1].overrides, "--model.converters=float8"));
  EXPECT_TRUE(Has(runs[1].overrides, "--float8.recipe_name=tensorwise"));
  EXPECT_EQ(runs[2].flavor, "1B");
  EXPECT_EQ(runs[2].precision, "bf16");
  EXPECT_EQ(runs[4].folder, "throughput_1B_float8_rowwise");
  EXPECT_TRUE(Has(runs[4].overrides, "--float8.recipe_name=rowwise"));
  EXPECT_TRUE(Has(runs[4].overrides, "--model.tokenizer_path=/b/data/tokenizer128k.model"));
  EXPECT_EQ(runs[5].flavor, "8B, 8 layers");
  EXPECT_EQ(runs[5].folder, "throughput_8B_8_layers");
  EXPECT_TRUE(Has(runs[5].overrides, "--model.flavor=8B"));
  EXPECT_TRUE(Has(runs[5].overrides, "--model.n_layers=8"));
  EXPECT_EQ(runs[7].precision, "float8 rowwise");
  for (const ThroughputRun& run : runs) {
    EXPECT_THAT(run.overrides, Contains("--job.device=cuda"));
    EXPECT_THAT(run.overrides, Contains("--training.mixed_precision_param=bfloat16"));
    // titan-run measures the GEMM ceiling; the datasheet's MFU is computed from its TFLOP/s.
    EXPECT_THAT(run.overrides, Not(Contains(HasSubstr("peak_tflops"))));
  }
}

TEST(ThroughputRow, TheLastLoggedWindowsFiguresAgainstBothPeaks) {
  absl::StatusOr<Metrics> metrics = ParseMetrics(
      "{\"step\": 10, \"loss\": 5, \"tps\": 100.0, \"tflops\": 1.0, \"mfu\": 0.1, \"mem_gib\": 1}\n"
      "{\"step\": 20, \"loss\": 4, \"tps\": 900.0, \"tflops\": 9.0, \"mfu\": 0.9, \"mem_gib\": "
      "2}\n",
      "m");
  ASSERT_TRUE(metrics.ok());
  ThroughputRun run{"debugmodel", "bf16", "throughput_debugmodel", 1, {}};
  Json row = ThroughputRow(run, "pass", *metrics, 900.0, 600.0);
  EXPECT_EQ(row["tokens_per_s"].get<double>(), 900.0);
  EXPECT_DOUBLE_EQ(row["mfu_percent"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(row["ceiling_tflops"].get<double>(), 600.0);
  EXPECT_DOUBLE_EQ(row["mfu_ceiling_percent"].get<double>(), 1.5);
  EXPECT_EQ(row["step"].get<int>(), 20);
  Json unknown = ThroughputRow(run, "pass", *metrics, std::nullopt, std::nullopt);
  EXPECT_TRUE(unknown["mfu_percent"].is_null());
  EXPECT_TRUE(unknown["mfu_ceiling_percent"].is_null());
  Json failed = ThroughputRow(run, "timed out", Metrics(), 900.0, std::nullopt);
  EXPECT_EQ(failed["status"], "timed out");
  EXPECT_TRUE(failed["tokens_per_s"].is_null());
  EXPECT_TRUE(failed["mfu_percent"].is_null());
}

TEST(FormatThroughputTable, FiguresOrNotAvailable) {
  Json rows = {{{"flavor", "1B"},
                {"precision", "bf16"},
                {"status", "pass"},
                {"tokens_per_s", 41234.4},
                {"tflops", 380.24},
                {"mfu_percent", nullptr},
                {"mfu_ceiling_percent", 52.31},
                {"mem_gib", 61.04}},
               {{"flavor", "1B"}, {"precision", "float8 rowwise"}, {"status", "fail"}}};
  const std::string table = FormatThroughputTable(rows);
  EXPECT_THAT(table, HasSubstr("1B           bf16              pass              41234     380.2  "
                               "   n/a        52.3      61.0"));
  EXPECT_THAT(table, HasSubstr("float8 rowwise    fail                n/a       n/a     n/a      "
                               "   n/a       n/a"));
}

TEST(ProfiledRun, ThreeStepsTheThirdProfiled) {
  Bundle bundle{"/b"};
  const ThroughputRun profiled = ProfiledRun(ThroughputRuns(bundle)[2]);
  EXPECT_EQ(profiled.folder, "throughput_1B_profiled");
  EXPECT_THAT(profiled.overrides, Contains("--training.steps=3"));
  EXPECT_THAT(profiled.overrides, Not(Contains("--training.steps=8")));
  EXPECT_THAT(profiled.overrides, Contains("--profiling.enable_profiling=true"));
  EXPECT_THAT(profiled.overrides, Contains("--profiling.profile_freq=3"));
  EXPECT_THAT(profiled.overrides, Contains("--model.flavor=1B"));
}

}  // namespace
}  // namespace titan::gpu_proof
