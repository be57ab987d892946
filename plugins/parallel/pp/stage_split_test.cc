#include "plugins/parallel/pp/stage_split.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace titan::pp {
namespace {

std::vector<int> Counts(const std::vector<PipelineStage>& stages) {
  std::vector<int> counts;
  for (const PipelineStage& s : stages) counts.push_back(s.end_layer - s.first_layer);
  return counts;
}

TEST(PpStageSplit, TheEmbeddingAndOutputCountAsLayersOfWork) {
  // 6 layers + 1 + 1 = 8 units over 4 stages: two each, less one on the first and last.
  auto four = SplitLayers(6, 4, 1, 1);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(Counts(*four), (std::vector<int>{1, 2, 2, 1}));
  EXPECT_EQ(four->front().first_layer, 0);
  EXPECT_EQ(four->back().end_layer, 6);
  for (size_t s = 1; s < four->size(); ++s) {
    EXPECT_EQ((*four)[s].first_layer, (*four)[s - 1].end_layer);
    EXPECT_EQ((*four)[s].stage, static_cast<int>(s));
  }
  // 8 stages: one unit each, so the first holds only the embedding, the last only the output.
  EXPECT_EQ(Counts(*SplitLayers(6, 8, 1, 1)), (std::vector<int>{0, 1, 1, 1, 1, 1, 1, 0}));
  // Where the units do not divide, the first stages take one more.
  EXPECT_EQ(Counts(*SplitLayers(7, 2, 0, 0)), (std::vector<int>{4, 3}));
}

TEST(PpStageSplit, TooFewLayersOrANegativeStageAreRefused) {
  auto many = SplitLayers(2, 8, 1, 1);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(std::string(many.status().message()).find("cannot fill 8 stages"), std::string::npos);
  auto negative = SplitLayers(1, 3, 2, 2);  // units 2, 2, 1: the last would hold -1
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(std::string(negative.status().message()).find("would hold"), std::string::npos);
}

TEST(PpStageSplit, LayersPerStageSetTheNumberOfStages) {
  EXPECT_EQ(StagesFor(6, 2, 1, 1), 4);
  EXPECT_EQ(StagesFor(6, 3, 1, 1), 3);  // ceil(8 / 3)
  EXPECT_EQ(StagesFor(126, 8, 1, 1), 16);
}

TEST(PpStageSplit, MessageTagsBeyondWhatMpiGuaranteesAreRefused) {
  EXPECT_TRUE(CheckMessageTags(8, 2047).ok());  // 32752 tags
  absl::Status many = CheckMessageTags(8, 2048);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(std::string(many.message()).find("32768 message tags"), std::string::npos);
}

}  // namespace
}  // namespace titan::pp
