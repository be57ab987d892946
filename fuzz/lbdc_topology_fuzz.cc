// A titan-lbdc topology file, read both as JSON and as TOML. A topology that reads has links
// between listed switches, both ways, and its controllers place and reach as titan-lbdc uses them.
#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/topology/switch_graph.h"
#include "fuzz/fuzz_support.h"

namespace {

void Check(const titan::topology::Topology& t) {
  TITAN_FUZZ_CHECK(t.size() > 0 && static_cast<int>(t.links.size()) == t.size(), "switches");
  for (int a = 0; a < t.size(); ++a) {
    for (int32_t b : t.links[static_cast<size_t>(a)]) {
      TITAN_FUZZ_CHECK(b >= 0 && b < t.size() && b != a, absl::StrCat(a, " - ", b));
      const auto& back = t.links[static_cast<size_t>(b)];
      TITAN_FUZZ_CHECK(std::find(back.begin(), back.end(), a) != back.end(),
                       absl::StrCat(a, " - ", b, " one way"));
    }
  }
  if (t.controllers_at.empty()) return;
  std::mt19937_64 random(1);
  auto sites = titan::topology::PlaceControllers(
      t, "given", static_cast<int>(t.controllers_at.size()), {}, random);
  if (!sites.ok()) return;
  for (int32_t site : *sites) TITAN_FUZZ_CHECK(site >= 0 && site < t.size(), absl::StrCat(site));
  titan::topology::PotentialControllers(t, *sites, 3, 0).IgnoreError();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes = titan::fuzz::Bytes(data, size);
  for (const char* name : {"topology.json", "topology.toml"}) {
    std::mt19937_64 random(1);
    auto topology = titan::topology::MakeTopology(titan::fuzz::WriteInput(name, bytes), random);
    if (topology.ok()) Check(*topology);
  }
  return 0;
}
