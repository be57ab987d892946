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
  int coordinate(MeshDim dim) const override {
    return dim == MeshDim::kEp ? expert_group_->rank() : coordinates_[static_cast<int>(dim)];
  }
  Communicator& group(MeshDim dim) override {
    return dim == MeshDim::kEp ? *expert_group_ : *groups_[static_cast<int>(dim)];
  }
  Communicator& group_with_context(MeshDim dim) override {
    const auto& flattened = with_context_[static_cast<int>(dim)];
    return flattened != nullptr ? *flattened : group(dim);
  }
  Communicator& expert_shard_group() override {
    return expert_shard_ != nullptr ? *expert_shard_ : group_with_context(MeshDim::kDpShard);
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
    if (shape_.degree(MeshDim::kCp) > 1) TITAN_RETURN_IF_ERROR(SplitWithContext());
    return SplitExperts();
  }

  // Expert parallelism's runs of ep consecutive ranks of dp_shard x cp, and the ranks at the same
  // place in every run.
  absl::Status SplitExperts() {
    Communicator& data = group_with_context(MeshDim::kDpShard);
    const int ep = shape_.expert_degree, place = data.rank();
    if (ep < 1 || data.size() % ep != 0) {
      return absl::InvalidArgumentError(absl::StrCat("device mesh: expert parallel degree ", ep,
                                                     " does not divide dp_shard x ",
                                                     "cp = ", data.size()));
    }
    absl::StatusOr<std::unique_ptr<Communicator>> run = data.Split(place / ep, place % ep);
    if (!run.ok()) {
      return absl::Status(run.status().code(),
                          absl::StrCat("device mesh: the ep group: ", run.status().message()));
    }
    expert_group_ = std::move(*run);
    if (ep == 1) return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<Communicator>> same = data.Split(place % ep, place / ep);
    if (!same.ok()) {
      return absl::Status(
          same.status().code(),
          absl::StrCat("device mesh: the expert shard group: ", same.status().message()));
    }
    expert_shard_ = std::move(*same);
    return absl::OkStatus();
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
                            absl::StrCat("device mesh: the ", MeshDimName(dim),
                                         " x cp group: ", group.status().message()));
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
  std::unique_ptr<Communicator> expert_group_;
  std::unique_ptr<Communicator> expert_shard_;  // when ep > 1
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
