// A titan-lbdc load trace (CSV, a line of per-switch flow counts per snapshot), read for as many
// switches as its first line has fields: every snapshot that reads has one count >= 0 per switch.
#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_support.h"
#include "tools/lbdc/loads.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes = titan::fuzz::Bytes(data, size);
  const absl::string_view first_line = bytes.substr(0, bytes.find('\n'));
  const int switches = 1 + static_cast<int>(std::count(first_line.begin(), first_line.end(), ','));
  const std::string path = titan::fuzz::WriteInput("trace.csv", bytes);
  std::mt19937_64 random(1);
  auto loads = titan::lbdc::MakeLoads("trace:" + path, switches, 0, 0.0, random);
  if (!loads.ok()) return 0;
  TITAN_FUZZ_CHECK(!loads->empty(), "no snapshot");
  for (const std::vector<double>& snapshot : *loads) {
    TITAN_FUZZ_CHECK(static_cast<int>(snapshot.size()) == switches, absl::StrCat(snapshot.size()));
    for (double load : snapshot) {
      TITAN_FUZZ_CHECK(std::isfinite(load) && load >= 0, absl::StrCat(load));
    }
  }
  return 0;
}
