#include "tools/gpu_proof/cpu_info.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace titan::gpu_proof {

std::string CpuModel(const std::string& cpuinfo) {
  std::string model;
  int processors = 0;
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    const absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, colon));
    if (key == "processor") ++processors;
    if (key == "model name" && model.empty()) {
      model = std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  if (model.empty()) return "unknown";
  return absl::StrCat(model, " (", processors, processors == 1 ? " processor)" : " processors)");
}

}  // namespace titan::gpu_proof
