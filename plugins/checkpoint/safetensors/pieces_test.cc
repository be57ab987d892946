#include "plugins/checkpoint/safetensors/pieces.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace titan::safetensors {
namespace {

using ::testing::HasSubstr;

PieceInfo Info(int rank, int index, std::vector<int64_t> offset, std::vector<int64_t> extent,
               std::vector<int64_t> full = {4, 6}, DType dtype = DType::kF32) {
  return PieceInfo{"model/w", dtype, std::move(full), std::move(offset), std::move(extent),
                   rank,      index};
}

std::string PlanError(std::vector<PieceInfo> pieces) {
  absl::StatusOr<std::vector<TensorSources>> plan = PlanAssembly(std::move(pieces));
  EXPECT_FALSE(plan.ok());
  return std::string(plan.status().message());
}

TEST(Pieces, BoxOfAPieceWithStridedRows) {
  std::vector<float> storage(4 * 10);
  CheckpointPiece piece{
      "model/w", {8, 6}, {4, 2}, {storage.data(), DType::kF32, {}, {4, 3}, {10, 1}}};
  absl::StatusOr<Box> box = BoxOf(piece);
  ASSERT_TRUE(box.ok()) << box.status();
  EXPECT_EQ(box->row0, 4);
  EXPECT_EQ(box->rows, 4);
  EXPECT_EQ(box->col0, 2);
  EXPECT_EQ(box->cols, 3);
  EXPECT_EQ(box->full_cols, 6);
  EXPECT_EQ(box->row_stride, 10);
  EXPECT_EQ(PieceRow(piece.data, *box, 2), reinterpret_cast<char*>(&storage[20]));

  CheckpointPiece vector{"model/n", {6}, {2}, {storage.data(), DType::kBF16, {}, {4}, {}}};
  box = BoxOf(vector);
  ASSERT_TRUE(box.ok()) << box.status();
  EXPECT_EQ(box->rows, 1);
  EXPECT_EQ(box->col0, 2);
  EXPECT_EQ(box->cols, 4);
}

// The experts' stacked weights [experts, rows, cols]: a piece of whole experts is a box of
// experts x rows rows.
TEST(Pieces, BoxOfSeesAThreeDimensionalTensorAsRows) {
  std::vector<float> storage(2 * 3 * 4);
  CheckpointPiece experts{"model/layers.0.moe.experts.w1",
                          {5, 3, 4},
                          {1, 0, 0},
                          {storage.data(), DType::kF32, {}, {2, 3, 4}, {}}};
  absl::StatusOr<Box> box = BoxOf(experts);
  ASSERT_TRUE(box.ok()) << box.status();
  EXPECT_EQ(box->row0, 3);
  EXPECT_EQ(box->rows, 6);
  EXPECT_EQ(box->col0, 0);
  EXPECT_EQ(box->cols, 4);
  EXPECT_EQ(box->full_rows, 15);
  EXPECT_EQ(box->full_cols, 4);
  EXPECT_EQ(box->row_stride, 4);
  EXPECT_EQ(PieceRow(experts.data, *box, 5), reinterpret_cast<char*>(&storage[20]));
  // Columns 1..2 of each row, in rows 6 apart: strides [18, 6, 1].
  experts.offset = {1, 0, 1};
  experts.data.shape = {2, 3, 2};
  experts.data.strides = {18, 6, 1};
  box = BoxOf(experts);
  ASSERT_TRUE(box.ok()) << box.status();
  EXPECT_EQ(box->col0, 1);
  EXPECT_EQ(box->cols, 2);
  EXPECT_EQ(box->row_stride, 6);
  // fsdp's boxes of a flat run: part of one row, rows of one expert.
  experts.offset = {3, 1, 1};
  experts.data = {storage.data(), DType::kF32, {}, {1, 1, 3}, {}};
  box = BoxOf(experts);
  ASSERT_TRUE(box.ok()) << box.status();
  EXPECT_EQ(box->row0, 10);
  EXPECT_EQ(box->rows, 1);
  EXPECT_EQ(box->col0, 1);
  EXPECT_EQ(box->cols, 3);
  experts.offset = {4, 1, 0};
  experts.data = {storage.data(), DType::kF32, {}, {1, 2, 4}, {}};
  box = BoxOf(experts);
  ASSERT_TRUE(box.ok()) << box.status();
  EXPECT_EQ(box->row0, 13);
  EXPECT_EQ(box->rows, 2);
}

TEST(Pieces, BoxOfRefusesPiecesItCannotStore) {
  float x[16];
  auto error = [](const CheckpointPiece& piece) {
    return std::string(BoxOf(piece).status().message());
  };
  EXPECT_THAT(error({"model/w", {}, {}, {x, DType::kF32, {}, {}, {}}}),
              HasSubstr("piece of 'model/w': expected a tensor of 1 or more dimensions"));
  EXPECT_THAT(error({"model/w", {2, 2, 2}, {0, 1, 0}, {x, DType::kF32, {}, {2, 1, 2}, {}}}),
              HasSubstr("piece of 'model/w': data [2, 1, 2] at [0, 1, 0] of [2, 2, 2] splits "
                        "dimension 1: expected a run of whole rows of the last dimension"));
  EXPECT_THAT(error({"model/w", {2, 2, 2}, {0, 0, 0}, {x, DType::kF32, {}, {2, 2, 2}, {8, 2, 1}}}),
              HasSubstr("expected its rows evenly spaced, found strides [8, 2, 1]"));
  EXPECT_THAT(error({"model/w", {4, 4}, {0}, {x, DType::kF32, {}, {4, 4}, {}}}),
              HasSubstr("expected an offset and data of 2 dimensions"));
  EXPECT_THAT(error({"model/w", {4, 4}, {2, 0}, {x, DType::kF32, {}, {3, 4}, {}}}),
              HasSubstr("data [3, 4] at [2, 0] lies outside the tensor's shape [4, 4]"));
  EXPECT_THAT(
      error({"model/w", {4, 4}, {0, 0}, {x, DType::kF32, {DeviceType::kCuda, 0}, {4, 4}, {}}}),
      HasSubstr("expected its data on the CPU"));
  EXPECT_THAT(error({"model/w", {4, 4}, {0, 0}, {x, DType::kI32, {}, {4, 4}, {}}}),
              HasSubstr("expected f32, bf16 or f16 data, found i32"));
  EXPECT_THAT(error({"model/w", {4, 4}, {0, 0}, {x, DType::kF32, {}, {4, 4}, {1, 4}}}),
              HasSubstr("expected its rows contiguous, found strides [1, 4]"));
  EXPECT_THAT(error({"model/w", {4, 4}, {0, 0}, {x, DType::kF32, {}, {4, 4}, {2, 1}}}),
              HasSubstr("its rows overlap"));
}

TEST(Pieces, DescriptionsSurviveEncoding) {
  std::vector<PieceInfo> infos = {Info(3, 0, {0, 0}, {2, 6}), Info(3, 1, {2, 0}, {2, 6})};
  infos[1].name = "model/layers.0.attention.wq.weight";
  infos[1].dtype = DType::kBF16;
  absl::StatusOr<std::vector<PieceInfo>> decoded = DecodePieceInfos(EncodePieceInfos(infos), 3);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), 2u);
  EXPECT_EQ((*decoded)[1].name, infos[1].name);
  EXPECT_EQ((*decoded)[1].dtype, DType::kBF16);
  EXPECT_EQ((*decoded)[1].offset, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ((*decoded)[1].extent, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ((*decoded)[1].rank, 3);
  EXPECT_EQ((*decoded)[1].index, 1);
  const std::string bytes = EncodePieceInfos(infos);
  EXPECT_FALSE(DecodePieceInfos(bytes.substr(0, bytes.size() - 3), 3).ok());
}

// Two replica groups (as HSDP has) of a tensor split by rows, the second half also by columns:
// each rectangle is taken once, from the lowest rank holding it.
TEST(Pieces, PlanTakesOneOfEachReplica) {
  absl::StatusOr<std::vector<TensorSources>> plan = PlanAssembly({
      Info(2, 0, {0, 0}, {2, 6}),
      Info(3, 0, {2, 3}, {2, 3}),
      Info(3, 1, {2, 0}, {2, 3}),
      Info(0, 0, {0, 0}, {2, 6}),
      Info(1, 0, {2, 0}, {2, 3}),
      Info(1, 1, {2, 3}, {2, 3}),
  });
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 1u);
  const std::vector<PieceInfo>& pieces = (*plan)[0].pieces;
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].rank, 0);
  EXPECT_EQ(pieces[1].rank, 1);
  EXPECT_EQ(pieces[1].index, 0);
  EXPECT_EQ(pieces[2].rank, 1);
  EXPECT_EQ(pieces[2].index, 1);
}

TEST(Pieces, PlanRefusesGapsOverlapsAndDisagreement) {
  EXPECT_THAT(PlanError({Info(0, 0, {0, 0}, {2, 6}), Info(1, 0, {3, 0}, {1, 6})}),
              HasSubstr("the pieces of 'model/w' [4, 6] cover 18 of its 24 elements"));
  EXPECT_THAT(PlanError({Info(0, 0, {0, 0}, {3, 6}), Info(1, 0, {2, 0}, {2, 6})}),
              HasSubstr("pieces of 'model/w' overlap: rank 0's piece at [0, 0] of extent [3, 6] "
                        "and rank 1's piece at [2, 0] of extent [2, 6]"));
  EXPECT_THAT(
      PlanError({Info(0, 0, {0, 0}, {2, 6}), Info(1, 0, {2, 0}, {2, 6}, {4, 6}, DType::kBF16)}),
      HasSubstr("pieces of 'model/w' disagree: rank 0 holds f32 [4, 6], rank 1 holds "
                "bf16 [4, 6]"));
}

}  // namespace
}  // namespace titan::safetensors
