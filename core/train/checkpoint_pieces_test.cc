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

TEST(FlatRunPieces, SplitsARunOfA3DTensorIntoBoxesOfWholeRowsAndMatrices) {
  float data[64];
  // A [3, 2, 4] tensor (3 experts of 2 x 4), elements 5..22: the end of expert 0 (the rest of its
  // row 1), expert 1 whole, the start of expert 2 (row 0 whole, then 3 of row 1's 4).
  ExpectPieces(FlatRunPieces("w", {3, 2, 4}, 5, 18, data),
               {{{0, 1, 1}, {1, 1, 3}, 0},
                {{1, 0, 0}, {1, 2, 4}, 3},
                {{2, 0, 0}, {1, 1, 4}, 11},
                {{2, 1, 0}, {1, 1, 3}, 15}},
               data);
  for (const CheckpointPiece& piece : FlatRunPieces("w", {3, 2, 4}, 5, 18, data)) {
    EXPECT_EQ(piece.full_shape, std::vector<int64_t>({3, 2, 4}));
  }
  // Whole experts only.
  ExpectPieces(FlatRunPieces("w", {3, 2, 4}, 8, 16, data), {{{1, 0, 0}, {2, 2, 4}, 0}}, data);
}

TEST(ParameterPieces, RedirectsIntoAStateSlotLaidOutLikeTheParameters) {
  std::vector<float> params(10), slot(10);
  Parameter p;
  p.name = "norm.weight";
  p.full_shape = {4};
  p.value = FlatF32(params.data() + 6, 4);
  std::vector<CheckpointPiece> pieces =
      ParameterPieces(p, "optimizer/exp_avg/", params.data(), slot.data());
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].name, "optimizer/exp_avg/norm.weight");
  EXPECT_EQ(pieces[0].data.data_as<float>(), slot.data() + 6);
  EXPECT_EQ(pieces[0].full_shape, (std::vector<int64_t>{4}));
}

// Tensor parallel keeps columns [2, 4) of a 3 x 4 matrix (a 3 x 2 box at [0, 2]); fsdp then keeps
// the box's flat elements 1..4. The pieces are boxes of the logical tensor.
TEST(ParameterPieces, PlaceATensorParallelBoxAndItsFlatRunInTheLogicalTensor) {
  std::vector<float> local(6), shard(4);
  Parameter p;
  p.name = "layers.0.attention.wo.weight";
  p.full_shape = {3, 4};
  p.value = TensorView{local.data(), DType::kF32, Device{}, {3, 2}, {}};
  p.local_offset = {0, 2};
  std::vector<CheckpointPiece> whole_box = ParameterPieces(p, "model/");
  ASSERT_EQ(whole_box.size(), 1u);
  EXPECT_EQ(whole_box[0].full_shape, (std::vector<int64_t>{3, 4}));
  ExpectPieces(whole_box, {{{0, 2}, {3, 2}, 0}}, local.data());

  p.placements[static_cast<int>(MeshDim::kDpShard)] = {Placement::Kind::kFlatShard, 0};
  p.value.data = nullptr;
  p.shard = FlatF32(shard.data(), 4);
  p.shard_offset = 1;
  std::vector<CheckpointPiece> run = ParameterPieces(p, "model/");
  // The end of the box's row 0, its row 1, the start of its row 2.
  ExpectPieces(run, {{{0, 3}, {1, 1}, 0}, {{1, 2}, {1, 2}, 1}, {{2, 2}, {1, 1}, 3}}, shard.data());
  for (const CheckpointPiece& piece : run)
    EXPECT_EQ(piece.full_shape, (std::vector<int64_t>{3, 4}));
}

}  // namespace
}  // namespace titan
