// --hotspot: the region is connected and of the asked size, and heating it moves load into it
// while the total stays what drift alone gives.
#include "tools/lbdc/hotspot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace titan::lbdc {
namespace {

// Switches 0 - 1 - ... - 19 in a line.
topology::Topology Line(int n) {
  topology::Topology line;
  line.links.resize(n);
  for (int s = 0; s < n; ++s) {
    line.name.push_back("s" + std::to_string(s));
    if (s > 0) line.links[s].push_back(s - 1), line.links[s - 1].push_back(s);
  }
  return line;
}

TEST(LbdcHotspot, TheRegionIsTheNearestSwitchesAroundOne) {
  std::mt19937_64 random(3);
  std::vector<int32_t> region = HotRegion(Line(20), 0.25, random);
  ASSERT_EQ(region.size(), 5u);
  std::sort(region.begin(), region.end());
  EXPECT_EQ(region.back() - region.front(), 4);  // contiguous on the line
}

TEST(LbdcHotspot, HeatingMovesLoadIntoTheRegionAndKeepsTheTotal) {
  std::vector<std::vector<double>> snapshots = {{1, 1, 1, 1}, {1, 2, 3, 4}, {4, 3, 2, 1}};
  ASSERT_TRUE(HeatRegion({0, 1}, 5.0, snapshots).ok());
  EXPECT_EQ(snapshots[0], (std::vector<double>{1, 1, 1, 1}));  // before the first change
  for (size_t step = 1; step < 3; ++step) {
    const std::vector<double>& loads = snapshots[step];
    EXPECT_NEAR(std::accumulate(loads.begin(), loads.end(), 0.0), 10.0, 1e-12);
  }
  EXPECT_NEAR(snapshots[1][0] / snapshots[1][2], 5.0 * 1 / 3, 1e-12);
  EXPECT_NEAR(snapshots[2][1] / snapshots[2][3], 5.0 * 3 / 1, 1e-12);
}

TEST(LbdcHotspot, BadSpecificationsAndOverflowsAreRefused) {
  for (const char* bad : {"0.07", "0,5", "1,5", "0.07,1", "0.07,nan", "x,2", "0.07,5,1"}) {
    EXPECT_THAT(std::string(ParseHotspot(bad).status().message()),
                ::testing::HasSubstr("expected FRACTION,FACTOR"))
        << bad;
  }
  auto good = ParseHotspot("0.07,10");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->fraction, 0.07);
  EXPECT_EQ(good->factor, 10.0);
  std::vector<std::vector<double>> huge = {{1e300, 1e300}, {1e300, 1e300}};
  EXPECT_THAT(std::string(HeatRegion({0}, 1e300, huge).message()),
              ::testing::HasSubstr("sum beyond the largest double"));
}

}  // namespace
}  // namespace titan::lbdc
