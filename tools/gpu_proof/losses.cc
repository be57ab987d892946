#include "tools/gpu_proof/losses.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace titan::gpu_proof {
namespace {

using Key = std::pair<int64_t, std::string>;  // step, "loss" or "eval_loss"

std::map<Key, double> Collect(const Metrics& metrics, const CompareOptions& options) {
  std::map<Key, double> values;
  for (const auto& [step, row] : metrics.training) {
    if (step > options.after_step) values[{step, "loss"}] = row["loss"].get<double>();
  }
  if (options.with_eval) {
    for (const auto& [step, loss] : metrics.eval) {
      if (step > options.after_step) values[{step, "eval_loss"}] = loss;
    }
  }
  return values;
}

// "3 (loss), 4 (eval_loss)" for the keys of `a` that `b` lacks; empty when none.
std::string Absent(const std::map<Key, double>& a, const std::map<Key, double>& b) {
  std::vector<std::string> names;
  for (const auto& [key, value] : a) {
    if (!b.count(key)) names.push_back(absl::StrCat(key.first, " (", key.second, ")"));
  }
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<Metrics> ParseMetrics(const std::string& text, const std::string& source) {
  Metrics metrics;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == absl::string_view::npos) continue;
    const std::string where = absl::StrCat(source, " line ", line_number, ": ");
    Json row = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded() || !row.is_object()) {
      return absl::DataLossError(
          absl::StrCat(where, "expected a JSON object, found '", line.substr(0, 120), "'"));
    }
    if (!row.contains("step") || !row["step"].is_number_integer()) {
      return absl::DataLossError(absl::StrCat(where, "expected an integer \"step\""));
    }
    const int64_t step = row["step"].get<int64_t>();
    const bool training = row.contains("loss"), eval = row.contains("eval_loss");
    if ((training && !row["loss"].is_number()) || (eval && !row["eval_loss"].is_number())) {
      return absl::DataLossError(absl::StrCat(where, "the loss is not a number"));
    }
    if ((training && metrics.training.count(step)) || (eval && metrics.eval.count(step))) {
      return absl::DataLossError(absl::StrCat(where, "step ", step, " is logged twice"));
    }
    if (training) metrics.training[step] = row;
    if (eval) metrics.eval[step] = row["eval_loss"].get<double>();
  }
  return metrics;
}

absl::StatusOr<Metrics> ReadMetrics(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("no metrics file ", path));
  std::stringstream text;
  text << file.rdbuf();
  return ParseMetrics(text.str(), path);
}

Comparison CompareLosses(const Metrics& got, const Metrics& want, const CompareOptions& options) {
  Comparison comparison;
  comparison.steps = Json::array();
  const std::map<Key, double> theirs = Collect(got, options), reference = Collect(want, options);
  for (const auto& [key, value] : reference) {
    Json row = {{"step", key.first},
                {"kind", key.second},
                {"loss", nullptr},
                {"reference", value},
                {"relative_difference", nullptr}};
    auto found = theirs.find(key);
    if (found != theirs.end()) {
      const double difference =
          found->second == value
              ? 0.0
              : (value == 0 ? std::numeric_limits<double>::infinity()
                            : std::fabs(found->second - value) / std::fabs(value));
      row["loss"] = found->second;
      row["relative_difference"] = difference;
      comparison.worst = std::max(comparison.worst, difference);
      if (!(difference <= options.tolerance) && comparison.reason.empty()) {
        comparison.reason = absl::StrFormat(
            "step %d %s %.6f against the reference's %.6f: relative difference %.2e, more "
            "than %.0e",
            key.first, key.second, found->second, value, difference, options.tolerance);
      }
    }
    comparison.steps.push_back(row);
  }
  const std::string missing = Absent(reference, theirs), extra = Absent(theirs, reference);
  if (reference.empty()) {
    comparison.reason = absl::StrCat("the reference has no losses after step ", options.after_step);
  } else if (!missing.empty()) {
    comparison.reason = absl::StrCat("steps missing from the run: ", missing);
  } else if (!extra.empty()) {
    comparison.reason = absl::StrCat("steps the reference does not have: ", extra);
  }
  comparison.pass = comparison.reason.empty();
  return comparison;
}

Json ToJson(const Comparison& comparison, double tolerance) {
  return {{"status", comparison.pass ? "pass" : "fail"},
          {"reason", comparison.reason},
          {"tolerance", tolerance},
          {"worst_relative_difference", comparison.worst},
          {"steps", comparison.steps}};
}

}  // namespace titan::gpu_proof
