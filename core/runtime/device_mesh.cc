#include "core/runtime/device_mesh.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_device.h"

namespace titan {
namespace {

class CommDeviceMesh : public DeviceMesh {
 public:
  CommDeviceMesh(const MeshShape& shape, std::unique_ptr<Communicator> world, DevicePlugin& device)
      : shape_(shape), world_(std::move(world)), device_(device) {
    coordinates_ = MeshCoordinates(shape_, world_->rank());
  }

  const MeshShape& shape() const override { return shape_; }
  int coordinate(MeshDim dim) const override { return coordinates_[static_cast<int>(dim)]; }
  Communicator& group(MeshDim dim) override { return *groups_[static_cast<int>(dim)]; }
  Communicator& group_with_context(MeshDim dim) override {
    const auto& flattened = with_context_[static_cast<int>(dim)];
    return flattened != nullptr ? *flattened : group(dim);
  }
  Communicator& world() override { return *world_; }
  DevicePlugin& device() override { return device_; }

  // The ranks differing from this one only along `dim` share the rank with that coordinate
  // zeroed as their color, and are ordered by their coordinate.
  absl::Status SplitGroups() {
    int stride = 1;
    for (int dim = kMeshDims - 1; dim >= 0; --dim) {
      int color = world_->rank() - coordinates_[dim] * stride;
      absl::StatusOr<std::unique_ptr<Communicator>> group = world_->Split(color, coordinates_[dim]);
      if (!group.ok()) {
        return absl::Status(
            group.status().code(),
            absl::StrCat("device mesh: the ", MeshDimName(static_cast<MeshDim>(dim)),
                         " group: ", group.status().message()));
      }
      groups_[dim] = std::move(*group);
      stride *= shape_.degrees[dim];
    }
    return shape_.degree(MeshDim::kCp) > 1 ? SplitWithContext() : absl::OkStatus();
  }

  // The data-parallel dimensions flattened with cp: the ranks sharing every other coordinate,
  // keyed by (dim, cp) coordinate.
  absl::Status SplitWithContext() {
    const auto stride = [&](MeshDim dim) {
      int product = 1;
      for (int d = static_cast<int>(dim) + 1; d < kMeshDims; ++d) product *= shape_.degrees[d];
      return product;
    };
    const int cp = coordinate(MeshDim::kCp), cp_degree = shape_.degree(MeshDim::kCp);
    for (MeshDim dim : {MeshDim::kDpReplicate, MeshDim::kDpShard}) {
      const int color = world_->rank() - coordinate(dim) * stride(dim) - cp * stride(MeshDim::kCp);
      absl::StatusOr<std::unique_ptr<Communicator>> group =
          world_->Split(color, coordinate(dim) * cp_degree + cp);
      if (!group.ok()) {
        return absl::Status(group.status().code(),
                            absl::StrCat("device mesh: the ", MeshDimName(dim), " x cp group: ",
                                         group.status().message()));
      }
      with_context_[static_cast<int>(dim)] = std::move(*group);
    }
    return absl::OkStatus();
  }

 private:
  MeshShape shape_;
  std::unique_ptr<Communicator> world_;
  DevicePlugin& device_;
  std::array<int, kMeshDims> coordinates_{};
  std::array<std::unique_ptr<Communicator>, kMeshDims> groups_;
  std::array<std::unique_ptr<Communicator>, kMeshDims> with_context_;  // when cp > 1
};

}  // namespace

std::array<int, kMeshDims> MeshCoordinates(const MeshShape& shape, int rank) {
  std::array<int, kMeshDims> coordinates{};
  for (int dim = kMeshDims - 1; dim >= 0; --dim) {
    coordinates[dim] = rank % shape.degrees[dim];
    rank /= shape.degrees[dim];
  }
  return coordinates;
}

absl::StatusOr<std::unique_ptr<DeviceMesh>> BuildDeviceMesh(std::unique_ptr<Communicator> world,
                                                            const MeshShape& shape,
                                                            DevicePlugin* device) {
  if (shape.world_size() != world->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device mesh: pp*dp_replicate*dp_shard*cp*tp = ", shape.world_size(),
                     ", but the world "
                     "communicator has ",
                     world->size(), " ranks"));
  }
  auto mesh = std::make_unique<CommDeviceMesh>(shape, std::move(world),
                                               device != nullptr ? *device : CpuDevice::Host());
  TITAN_RETURN_IF_ERROR(mesh->SplitGroups());
  return std::unique_ptr<DeviceMesh>(std::move(mesh));
}

}  // namespace titan
