#include "core/train/generate.h"

#include <gtest/gtest.h>

#include <set>

namespace titan {
namespace {

TEST(SampleToken, TemperatureZeroTopKAndTopP) {
  const std::vector<float> logits = {0.0f, 3.0f, 2.9f, -5.0f};
  std::mt19937_64 rng(0);
  EXPECT_EQ(SampleToken(logits, {0.0, 0, 1.0}, rng), 1);
  std::set<int32_t> top2, nucleus;
  for (int i = 0; i < 200; ++i) {
    top2.insert(SampleToken(logits, {1.0, 2, 1.0}, rng));
    nucleus.insert(SampleToken(logits, {1.0, 0, 0.3}, rng));  // the top token alone holds > 0.3
  }
  EXPECT_EQ(top2, (std::set<int32_t>{1, 2}));
  EXPECT_EQ(nucleus, (std::set<int32_t>{1}));
}

}  // namespace
}  // namespace titan
