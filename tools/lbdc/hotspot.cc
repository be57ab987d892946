#include "tools/lbdc/hotspot.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace titan::lbdc {

absl::StatusOr<Hotspot> ParseHotspot(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, ',');
  Hotspot hotspot;
  if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &hotspot.fraction) ||
      !absl::SimpleAtod(parts[1], &hotspot.factor) || !(hotspot.fraction > 0.0) ||
      !(hotspot.fraction < 1.0) || !(hotspot.factor > 1.0) || !std::isfinite(hotspot.factor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hotspot=", text,
                     ": expected FRACTION,FACTOR with 0 < FRACTION < 1 (the share of switches in "
                     "the hot region) and a finite FACTOR > 1 (how much hotter), e.g. 0.07,5"));
  }
  return hotspot;
}

std::vector<int32_t> HotRegion(const topology::Topology& topology, double fraction,
                               std::mt19937_64& random) {
  const int n = topology.size();
  const size_t size = static_cast<size_t>(std::ceil(fraction * n));
  std::vector<char> seen(n, 0);
  const int32_t centre = std::uniform_int_distribution<int32_t>(0, n - 1)(random);
  std::vector<int32_t> region = {centre};
  seen[centre] = 1;
  for (size_t head = 0; head < region.size() && region.size() < size; ++head) {
    for (int32_t next : topology.links[region[head]]) {
      if (seen[next] || region.size() == size) continue;
      seen[next] = 1;
      region.push_back(next);
    }
  }
  return region;
}

absl::Status HeatRegion(const std::vector<int32_t>& region, double factor,
                        std::vector<std::vector<double>>& snapshots) {
  for (size_t step = 1; step < snapshots.size(); ++step) {
    std::vector<double>& loads = snapshots[step];
    double before = 0.0, after = 0.0;
    for (double w : loads) before += w;
    for (int32_t s : region) loads[s] *= factor;
    for (double w : loads) after += w;
    if (!std::isfinite(after)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hotspot: the loads after change ", step, " times ", factor,
                       " in the hot region sum beyond the largest double; expected a finite sum"));
    }
    if (after > 0.0) {
      for (double& w : loads) w *= before / after;
    }
  }
  return absl::OkStatus();
}

}  // namespace titan::lbdc
