#include "tools/gpu_proof/kernel_profile.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace titan::gpu_proof {
namespace {

struct Sum {
  double us = 0;
  int calls = 0;
};

// The entries of `sums`, most time first.
std::vector<std::pair<std::string, Sum>> ByTime(const std::map<std::string, Sum>& sums) {
  std::vector<std::pair<std::string, Sum>> sorted(sums.begin(), sums.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  return sorted;
}

}  // namespace

std::string KernelClass(const std::string& kernel) {
  // The first prefix that matches names the class.
  static const std::vector<std::pair<std::string, std::string>> kPrefixes = {
      {"Float8Gemm", "GEMMs"},    {"GroupedGemm", "GEMMs"},
      {"Gemm", "GEMMs"},          {"Float8", "Float8 casts"},
      {"Attention", "attention"}, {"RmsNorm", "norms"},
      {"Rope", "RoPE"},           {"SwiGlu", "SwiGLU"},
      {"Embedding", "embedding"}, {"CrossEntropy", "loss"},
      {"Moe", "experts"},         {"AdamStep", "optimizer"},
      {"SgdStep", "optimizer"},   {"SumOfSquares", "optimizer"},
      {"Cast", "casts"},          {"CopyToHost", "copies"},
      {"CopyFromHost", "copies"}};
  for (const auto& [prefix, name] : kPrefixes) {
    if (absl::StartsWith(kernel, prefix)) return name;
  }
  return "elementwise";
}

absl::StatusOr<Json> KernelProfile(const std::string& trace_json) {
  const Json trace = Json::parse(trace_json, nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    return absl::InvalidArgumentError("not a trace-event JSON object with traceEvents");
  }
  std::map<std::string, Sum> classes, kernels;
  double step_us = 0, kernels_us = 0;
  for (const Json& event : trace["traceEvents"]) {
    if (event.value("ph", "") != "X" || !event.contains("dur") || !event["dur"].is_number()) {
      continue;
    }
    const double us = event["dur"].get<double>();
    const std::string category = event.value("cat", ""), name = event.value("name", "");
    if (category == "step") step_us += us;
    if (category != "kernel") continue;
    kernels_us += us;
    Sum& kernel = kernels[name];
    kernel.us += us;
    ++kernel.calls;
    Sum& sum = classes[KernelClass(name)];
    sum.us += us;
    ++sum.calls;
  }
  if (kernels.empty()) return absl::NotFoundError("the trace holds no kernel span");
  Json profile = {{"step_ms", step_us / 1e3}, {"kernels_ms", kernels_us / 1e3}};
  Json rows = Json::array();
  for (const auto& [name, sum] : ByTime(classes)) {
    rows.push_back({{"class", name},
                    {"ms", sum.us / 1e3},
                    {"calls", sum.calls},
                    {"percent_of_step", step_us > 0 ? 100.0 * sum.us / step_us : 0.0}});
  }
  profile["classes"] = rows;
  Json top = Json::array();
  for (const auto& [name, sum] : ByTime(kernels)) {
    if (top.size() == 8) break;
    top.push_back({{"kernel", name}, {"ms", sum.us / 1e3}, {"calls", sum.calls}});
  }
  profile["top_kernels"] = top;
  return profile;
}

std::string FormatKernelProfile(const Json& profile) {
  std::string text = absl::StrFormat(
      "one profiled step: %.1f ms, of which kernels %.1f ms (each timed alone on the device)\n",
      profile.value("step_ms", 0.0), profile.value("kernels_ms", 0.0));
  absl::StrAppend(&text,
                  absl::StrFormat("  %-14s %10s %7s %9s\n", "class", "ms", "calls", "% step"));
  for (const Json& row : profile.value("classes", Json::array())) {
    absl::StrAppend(&text, absl::StrFormat("  %-14s %10.2f %7d %9.1f\n", row.value("class", "?"),
                                           row.value("ms", 0.0), row.value("calls", 0),
                                           row.value("percent_of_step", 0.0)));
  }
  return text;
}

}  // namespace titan::gpu_proof
