#include "core/train/checkpoint_pieces.h"

#include <gtest/gtest.h>

namespace titan {
namespace {

struct Expected {
  std::vector<int64_t> offset, shape;
  int64_t data_index;
};

void ExpectPieces(const std::vector<CheckpointPiece>& pieces, const std::vector<Expected>& want,
                  const float* data) {
  ASSERT_EQ(pieces.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(pieces[i].offset, want[i].offset) << i;
    EXPECT_EQ(pieces[i].data.shape, want[i].shape) << i;
    EXPECT_EQ(pieces[i].data.data_as<float>(), data + want[i].data_index) << i;
  }
}

TEST(FlatRunPieces, SplitsARunOfAMatrixIntoRowBoxes) {
  float data[32];
  // A 5 x 4 matrix, elements 6..17: the end of row 1, rows 2 and 3, the start of row 4.
  ExpectPieces(FlatRunPieces("w", {5, 4}, 6, 12, data),
               {{{1, 2}, {1, 2}, 0}, {{2, 0}, {2, 4}, 2}, {{4, 0}, {1, 2}, 10}}, data);
  // Within one row, whole rows only, and a vector.
  ExpectPieces(FlatRunPieces("w", {5, 4}, 5, 2, data), {{{1, 1}, {1, 2}, 0}}, data);
  ExpectPieces(FlatRunPieces("w", {5, 4}, 4, 8, data), {{{1, 0}, {2, 4}, 0}}, data);
  ExpectPieces(FlatRunPieces("v", {7}, 3, 4, data), {{{3}, {4}, 0}}, data);
  EXPECT_TRUE(FlatRunPieces("w", {5, 4}, 3, 0, data).empty());
}

TEST(ParameterPieces, RedirectsIntoAStateSlotLaidOutLikeTheParameters) {
  std::vector<float> params(10), slot(10);
  Parameter p;
  p.name = "norm.weight";
  p.full_shape = {4};
  p.value = FlatF32(params.data() + 6, 4);
  std::vector<CheckpointPiece> pieces = ParameterPieces(p, "optimizer/exp_avg/", params.data(),
                                                        slot.data());
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].name, "optimizer/exp_avg/norm.weight");
  EXPECT_EQ(pieces[0].data.data_as<float>(), slot.data() + 6);
  EXPECT_EQ(pieces[0].full_shape, (std::vector<int64_t>{4}));
}

}  // namespace
}  // namespace titan
