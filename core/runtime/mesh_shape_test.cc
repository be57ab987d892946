#include "core/runtime/mesh_shape.h"

#include <gtest/gtest.h>

namespace titan {
namespace {

ConfigView Parallelism(int64_t pp, int64_t replicate, int64_t shard, int64_t cp, int64_t tp) {
  auto entry = [](int64_t v) { return ConfigView::Entry{ConfigValue(v), "r.toml:1:1"}; };
  return ConfigView("parallelism", {{"pipeline_parallel_degree", entry(pp)},
                                    {"data_parallel_replicate_degree", entry(replicate)},
                                    {"data_parallel_shard_degree", entry(shard)},
                                    {"context_parallel_degree", entry(cp)},
                                    {"tensor_parallel_degree", entry(tp)}});
}

TEST(MeshShape, ShardDegreeMinusOneTakesTheRest) {
  auto shape = InferMeshShape(Parallelism(2, 1, -1, 1, 2), 16);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->degree(MeshDim::kDpShard), 4);
  EXPECT_EQ(shape->degree(MeshDim::kPp), 2);
  EXPECT_EQ(shape->degree(MeshDim::kTp), 2);
  EXPECT_EQ(shape->world_size(), 16);
}

TEST(MeshShape, ExplicitDegreesMustMultiplyToTheWorld) {
  auto shape = InferMeshShape(Parallelism(1, 2, 3, 1, 1), 4);
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().message(),
            "[parallelism]: pp*dp_replicate*dp_shard*cp*tp = 1*2*3*1*1 = 6, but 4 ranks were "
            "launched");
}

TEST(MeshShape, LeftoverMustDivideTheWorld) {
  auto shape = InferMeshShape(Parallelism(1, 1, -1, 1, 8), 1);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("pp*dp_replicate*cp*tp = 8 does not divide the 1"),
            absl::string_view::npos)
      << shape.status();
}

TEST(MeshShape, ShardDegreeZeroIsRejected) {
  auto shape = InferMeshShape(Parallelism(1, 1, 0, 1, 1), 1);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("must be -1 or at least 1"), absl::string_view::npos);
}

// Each degree is at most 2^20 (the schema's bound); their product is checked before an int
// holds it.
TEST(MeshShape, ProductOfDegreesIsBounded) {
  EXPECT_EQ(*RanksOfDegrees(Parallelism(2, 1, -1, 3, 2)), 12);
  const int64_t big = int64_t{1} << 20;
  auto ranks = RanksOfDegrees(Parallelism(big, big, big, big, big));
  ASSERT_FALSE(ranks.ok());
  EXPECT_EQ(ranks.status().message(),
            "[parallelism]: the degrees multiply to more than the limit of 2147483647 ranks");
  auto shape = InferMeshShape(Parallelism(big, big, 1, 1, 1), 8);
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().message(),
            "[parallelism]: the degrees multiply to more than the limit of 2147483647 ranks");
}

}  // namespace
}  // namespace titan
