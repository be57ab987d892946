#include "tools/gpu_proof/summary.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/gpu_proof/kernel_profile.h"
#include "tools/gpu_proof/throughput.h"

namespace titan::gpu_proof {
namespace {

// A reason longer than this is cut in the summary; the report has it whole.
constexpr size_t kReasonWidth = 160;

std::string Text(const Json& object, const char* key, const std::string& otherwise = "") {
  return object.is_object() && object.contains(key) && object[key].is_string()
             ? object[key].get<std::string>()
             : otherwise;
}

double Number(const Json& object, const char* key) {
  return object.is_object() && object.contains(key) && object[key].is_number()
             ? object[key].get<double>()
             : 0.0;
}

}  // namespace

std::string FormatSummary(const Json& report) {
  std::string text = absl::StrCat("gpu-check: ", Text(report, "device", "no CUDA device"), "\n");
  absl::StrAppend(&text, absl::StrFormat("  %-20s %-10s %8s %8s  %s\n", "part", "status", "seconds",
                                         "budget", "reason"));
  const Json parts = report.value("parts", Json::object());
  Json throughput_rows = Json::array();
  Json kernel_profile;
  for (const auto& [name, part] : parts.items()) {
    std::string reason = Text(part, "reason");
    if (reason.size() > kReasonWidth) reason = reason.substr(0, kReasonWidth - 3) + "...";
    std::string line =
        absl::StrFormat("  %-20s %-10s %8.1f %8.1f  %s", name, Text(part, "status", "?"),
                        Number(part, "seconds"), Number(part, "budget_s"), reason);
    absl::StrAppend(&text, absl::StripTrailingAsciiWhitespace(line), "\n");
    if (name == "throughput" && part.contains("details")) {
      throughput_rows = part["details"].value("rows", Json::array());
      kernel_profile = part["details"].value("kernel_profile", Json());
    }
  }
  if (!throughput_rows.empty()) {
    absl::StrAppend(&text, "throughput (one GPU):\n", FormatThroughputTable(throughput_rows));
  }
  if (kernel_profile.is_object()) {
    absl::StrAppend(&text, "the 1B bf16 ", FormatKernelProfile(kernel_profile));
  }
  absl::StrAppend(&text, "verdict: ", Text(report, "verdict", "?"), " (exit ",
                  report.value("exit_code", -1), ")\n");
  absl::StrAppend(&text, "report: ", Text(report, "report"), "\nlog: ", Text(report, "log"), "\n");
  return text;
}

}  // namespace titan::gpu_proof
