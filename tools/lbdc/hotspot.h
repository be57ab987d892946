// A regional hotspot for titan-lbdc's time-varying mode (--hotspot=FRACTION,FACTOR): from the
// first change on, the loads of one region, the FRACTION of switches nearest (in hops) a switch
// drawn at random, are FACTOR times what drift alone gives them, and every load is scaled so
// that the total stays what drift alone gives. The load moves into the region; the potential
// sets around it, not the number of controllers, then limit how well it can be balanced.
#ifndef TITAN_TOOLS_LBDC_HOTSPOT_H_
#define TITAN_TOOLS_LBDC_HOTSPOT_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/topology/switch_graph.h"
#include "titan/status.h"

namespace titan::lbdc {

struct Hotspot {
  double fraction = 0.0;  // of the switches, in (0, 1)
  double factor = 1.0;    // > 1
};

// "FRACTION,FACTOR"; errors name the flag and what was expected.
absl::StatusOr<Hotspot> ParseHotspot(const std::string& text);

// The ceil(fraction x N) switches nearest a switch drawn with `random`, breadth first.
std::vector<int32_t> HotRegion(const topology::Topology& topology, double fraction,
                               std::mt19937_64& random);

// Heats `region` in every snapshot after the first (see the top of this file); an error when
// the heated loads would sum beyond the largest double.
absl::Status HeatRegion(const std::vector<int32_t>& region, double factor,
                        std::vector<std::vector<double>>& snapshots);

}  // namespace titan::lbdc

#endif  // TITAN_TOOLS_LBDC_HOTSPOT_H_
