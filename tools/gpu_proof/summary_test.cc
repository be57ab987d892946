#include "tools/gpu_proof/summary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace titan::gpu_proof {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(FormatSummary, EachPartTheThroughputTableAndTheVerdict) {
  Json report = {
      {"device", "NVIDIA H200 (compute capability 9.0)"},
      {"parts",
       {{"bundle", {{"status", "pass"}, {"seconds", 12.5}, {"budget_s", 60}}},
        {"layouts", {{"status", "not run"}, {"reason", "no launcher"}, {"budget_s", 90}}},
        {"throughput",
         {{"status", "pass"},
          {"details",
           {{"rows",
             {{{"flavor", "1B"},
               {"precision", "bf16"},
               {"status", "pass"},
               {"tokens_per_s", 41000.5},
               {"tflops", 380.2},
               {"mfu_percent", 38.4},
               {"mem_gib", 61.0}}}}}}}}}},
      {"verdict", "pass"},
      {"exit_code", 0},
      {"report", "/r.json"},
      {"log", "/r.log"}};
  const std::string text = FormatSummary(report);
  EXPECT_THAT(text, HasSubstr("gpu-check: NVIDIA H200"));
  EXPECT_THAT(text, HasSubstr("bundle               pass           12.5     60.0\n"));
  EXPECT_THAT(text, HasSubstr("layouts              not run         0.0     90.0  no launcher"));
  EXPECT_THAT(text, HasSubstr("41000"));
  EXPECT_THAT(text, HasSubstr("38.4"));
  EXPECT_THAT(text, HasSubstr("verdict: pass (exit 0)"));
  EXPECT_THAT(text, HasSubstr("report: /r.json"));
}

TEST(FormatSummary, CutsALongReason) {
  Json report = {{"parts", {{"kernels", {{"status", "fail"}, {"reason", std::string(500, 'x')}}}}}};
  const std::string text = FormatSummary(report);
  EXPECT_THAT(text, HasSubstr(std::string(157, 'x') + "...\n"));
  EXPECT_THAT(text, Not(HasSubstr(std::string(158, 'x'))));
}

TEST(FormatSummary, NoDeviceAndNoTable) {
  Json report = {{"device", nullptr},
                 {"parts", {{"kernels", {{"status", "not run"}, {"reason", "no CUDA device"}}}}},
                 {"verdict", "no device"},
                 {"exit_code", 3}};
  const std::string text = FormatSummary(report);
  EXPECT_THAT(text, HasSubstr("gpu-check: no CUDA device"));
  EXPECT_THAT(text, Not(HasSubstr("throughput")));
  EXPECT_THAT(text, HasSubstr("verdict: no device (exit 3)"));
}

}  // namespace
}  // namespace titan::gpu_proof
