#ifndef TITAN_CORE_RUNTIME_DEVICE_MESH_H_
#define TITAN_CORE_RUNTIME_DEVICE_MESH_H_

#include <array>
#include <memory>

#include "titan/device_mesh.h"
#include "titan/status.h"

namespace titan {

// A rank's coordinates on `shape`, ranks laid out row-major with pp outermost and tp
// innermost (so tp neighbours are adjacent ranks, as TorchTitan lays them out).
std::array<int, kMeshDims> MeshCoordinates(const MeshShape& shape, int rank);

// The mesh over `world`, with one sub-communicator per dimension made by Split, computing on
// `device` (null: the CPU). Collective: every rank of `world` must call it with the same shape.
absl::StatusOr<std::unique_ptr<DeviceMesh>> BuildDeviceMesh(std::unique_ptr<Communicator> world,
                                                            const MeshShape& shape,
                                                            DevicePlugin* device = nullptr);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_DEVICE_MESH_H_
