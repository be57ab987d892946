#include "tools/gpu_proof/losses.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace titan::gpu_proof {
namespace {

using ::testing::HasSubstr;

Metrics Parse(const std::string& text) {
  absl::StatusOr<Metrics> metrics = ParseMetrics(text, "metrics.jsonl");
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  return metrics.ok() ? *metrics : Metrics();
}

// Steps first..last with losses 8, 7, ... and an eval loss at step 15.
Metrics Losses(int first, int last, double shift = 0) {
  std::string text;
  for (int step = first; step <= last; ++step) {
    text += "{\"step\": " + std::to_string(step) +
            ", \"loss\": " + std::to_string(9.0 - step / 10.0 + shift) + ", \"mfu\": null}\n";
  }
  if (first <= 15 && 15 <= last) text += "{\"step\": 15, \"eval_loss\": 7.25}\n";
  return Parse(text);
}

TEST(ParseMetrics, TrainingRowsAndEvalRowsByStep) {
  Metrics metrics = Parse(
      "{\"step\": 1, \"loss\": 8.5, \"tps\": 100.0, \"mfu\": null}\n\n"
      "{\"step\": 2, \"loss\": 8.25}\n{\"step\": 2, \"eval_loss\": 8.0}\n");
  ASSERT_EQ(metrics.training.size(), 2u);
  EXPECT_EQ(metrics.Loss(1), 8.5);
  EXPECT_EQ(metrics.training.at(1)["tps"].get<double>(), 100.0);
  ASSERT_EQ(metrics.eval.size(), 1u);
  EXPECT_EQ(metrics.eval.at(2), 8.0);
}

TEST(ParseMetrics, ErrorsNameTheLineAndTheProblem) {
  EXPECT_THAT(ParseMetrics("{\"step\": 1, \"loss\": 8.5}\n{\"step\": 2, \"lo", "m.jsonl")
                  .status()
                  .message(),
              HasSubstr("m.jsonl line 2: expected a JSON object"));
  EXPECT_THAT(ParseMetrics("{\"step\": 1, \"loss\": nan}", "m").status().message(),
              HasSubstr("line 1"));
  EXPECT_THAT(ParseMetrics("{\"loss\": 1.0}", "m").status().message(), HasSubstr("\"step\""));
  EXPECT_THAT(ParseMetrics("{\"step\": 1, \"loss\": \"x\"}", "m").status().message(),
              HasSubstr("not a number"));
  EXPECT_THAT(ParseMetrics("{\"step\": 1, \"loss\": 1}\n{\"step\": 1, \"loss\": 1}", "m")
                  .status()
                  .message(),
              HasSubstr("step 1 is logged twice"));
}

TEST(ReadMetrics, AMissingFileIsAnErrorNamingIt) {
  EXPECT_THAT(ReadMetrics("/nonexistent/metrics.jsonl").status().message(),
              HasSubstr("/nonexistent/metrics.jsonl"));
}

TEST(CompareLosses, PassesWithinTheTolerance) {
  Comparison comparison = CompareLosses(Losses(1, 10, 5e-6), Losses(1, 10), {.tolerance = 1e-5});
  EXPECT_TRUE(comparison.pass) << comparison.reason;
  EXPECT_GT(comparison.worst, 0);
  EXPECT_LE(comparison.worst, 1e-5);
  EXPECT_EQ(comparison.steps.size(), 10u);
}

TEST(CompareLosses, FailsBeyondItNamingTheFirstStep) {
  Metrics got = Losses(1, 10);
  got.training[3]["loss"] = got.Loss(3) * (1 + 3e-5);
  Comparison comparison = CompareLosses(got, Losses(1, 10), {.tolerance = 1e-5});
  EXPECT_FALSE(comparison.pass);
  EXPECT_THAT(comparison.reason, HasSubstr("step 3 loss"));
  EXPECT_NEAR(comparison.worst, 3e-5, 1e-9);
}

TEST(CompareLosses, MissingAndExtraStepsFail) {
  Comparison missing = CompareLosses(Losses(1, 8), Losses(1, 10), {.tolerance = 1e-5});
  EXPECT_FALSE(missing.pass);
  EXPECT_THAT(missing.reason, HasSubstr("steps missing from the run: 9 (loss), 10 (loss)"));
  Comparison extra = CompareLosses(Losses(1, 11), Losses(1, 10), {.tolerance = 1e-5});
  EXPECT_FALSE(extra.pass);
  EXPECT_THAT(extra.reason, HasSubstr("11 (loss)"));
}

TEST(CompareLosses, NothingToCompareFails) {
  Comparison comparison = CompareLosses(Metrics(), Metrics(), {.tolerance = 1e-5});
  EXPECT_FALSE(comparison.pass);
  EXPECT_THAT(comparison.reason, HasSubstr("no losses"));
}

TEST(CompareLosses, ExactAfterAStepWithEvalLossesTooIgnoresTheStepsBefore) {
  CompareOptions exact{.tolerance = 0, .after_step = 10, .with_eval = true};
  Metrics resumed = Losses(11, 20);
  EXPECT_TRUE(CompareLosses(resumed, Losses(1, 20), exact).pass);
  Metrics off = Losses(11, 20);
  off.eval[15] = 7.2500001;
  Comparison comparison = CompareLosses(off, Losses(1, 20), exact);
  EXPECT_FALSE(comparison.pass);
  EXPECT_THAT(comparison.reason, HasSubstr("step 15 eval_loss"));
  Metrics no_eval = Losses(11, 20);
  no_eval.eval.clear();
  EXPECT_THAT(CompareLosses(no_eval, Losses(1, 20), exact).reason, HasSubstr("15 (eval_loss)"));
}

TEST(ToJson, TheStatusTheReasonAndTheTable) {
  Json json = ToJson(CompareLosses(Losses(1, 2), Losses(1, 2), {.tolerance = 1e-5}), 1e-5);
  EXPECT_EQ(json["status"], "pass");
  EXPECT_EQ(json["steps"].size(), 2u);
  EXPECT_EQ(json["steps"][0]["relative_difference"].get<double>(), 0.0);
}

}  // namespace
}  // namespace titan::gpu_proof
