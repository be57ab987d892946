#include "core/runtime/device_mesh.h"

#include <gtest/gtest.h>

#include "core/runtime/single_process_comm.h"

namespace titan {
namespace {

TEST(MeshCoordinatesTest, TpIsInnermostAndPpOutermost) {
  MeshShape shape;
  shape.degrees = {2, 1, 3, 1, 2};  // pp, dp_replicate, dp_shard, cp, tp
  EXPECT_EQ(MeshCoordinates(shape, 0), (std::array<int, kMeshDims>{0, 0, 0, 0, 0}));
  EXPECT_EQ(MeshCoordinates(shape, 1), (std::array<int, kMeshDims>{0, 0, 0, 0, 1}));
  EXPECT_EQ(MeshCoordinates(shape, 2), (std::array<int, kMeshDims>{0, 0, 1, 0, 0}));
  EXPECT_EQ(MeshCoordinates(shape, 11), (std::array<int, kMeshDims>{1, 0, 2, 0, 1}));
}

TEST(DeviceMeshTest, OneRankHasGroupsOfOne) {
  auto mesh = BuildDeviceMesh(std::make_unique<SingleProcessCommunicator>(), MeshShape{});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ((*mesh)->world().size(), 1);
  EXPECT_EQ((*mesh)->group(MeshDim::kDpShard).size(), 1);
  EXPECT_EQ((*mesh)->coordinate(MeshDim::kTp), 0);
}

TEST(DeviceMeshTest, ShapeMustCoverTheWorld) {
  MeshShape shape;
  shape.degrees = {1, 1, 2, 1, 1};
  auto mesh = BuildDeviceMesh(std::make_unique<SingleProcessCommunicator>(), shape);
  ASSERT_FALSE(mesh.ok());
  EXPECT_NE(mesh.status().message().find("= 2, but the world communicator has 1 ranks"),
            std::string::npos)
      << mesh.status();
}

}  // namespace
}  // namespace titan
