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

// The experts' stacked weights [experts, rows, cols] sharded flat by fsdp: boxes of 3 dimensions
// (part of a row, whole rows of one expert, whole experts), each contiguous.
TEST(FlatRunPieces, SplitsARunOfAStackIntoBoxes) {
  float data[64];
  // [2, 3, 4], elements 5..19: the end of expert 0's row 1, its row 2, all of expert 1's first two
  // rows.
  ExpectPieces(FlatRunPieces("e", {2, 3, 4}, 5, 15, data),
               {{{0, 1, 1}, {1, 1, 3}, 0}, {{0, 2, 0}, {1, 1, 4}, 3}, {{1, 0, 0}, {1, 2, 4}, 7}},
               data);
  // Whole experts, and a run within one row.
  ExpectPieces(FlatRunPieces("e", {3, 2, 4}, 8, 16, data), {{{1, 0, 0}, {2, 2, 4}, 0}}, data);
  ExpectPieces(FlatRunPieces("e", {3, 2, 4}, 9, 2, data), {{{1, 0, 1}, {1, 1, 2}, 0}}, data);
  // Every element once, whatever the run.
  for (int64_t first = 0; first < 24; ++first) {
    for (int64_t count = 1; first + count <= 24; ++count) {
      int64_t covered = 0;
      for (const CheckpointPiece& piece : FlatRunPieces("e", {2, 3, 4}, first, count, data)) {
        const int64_t at = piece.offset[0] * 12 + piece.offset[1] * 4 + piece.offset[2];
        EXPECT_EQ(piece.data.data_as<float>(), data + (at - first));
        EXPECT_TRUE(piece.data.shape[0] == 1 || (piece.offset[1] == 0 && piece.data.shape[1] == 3))
            << "a box: rows of one expert, or whole experts";
        covered += piece.data.numel();
      }
      EXPECT_EQ(covered, count) << first << " " << count;
    }
  }
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
