// The ranks of a job arranged on named dimensions, outermost first: pp, dp_replicate,
// dp_shard, cp, tp. Each dimension has its own sub-communicator; every rank computes on one device.
// Expert parallelism (ep) is a dimension without ranks of its own: it borrows them from dp_shard x
// cp, as TorchTitan's does (dp_shard x cp = efsdp x ep).
#ifndef TITAN_DEVICE_MESH_H_
#define TITAN_DEVICE_MESH_H_

#include <array>
#include <memory>

#include "absl/strings/string_view.h"
#include "titan/communicator.h"
#include "titan/device.h"

namespace titan {

enum class MeshDim : uint8_t { kPp, kDpReplicate, kDpShard, kCp, kTp, kEp };
inline constexpr int kMeshDims = 5;  // the dimensions with ranks of their own: all but kEp

constexpr absl::string_view MeshDimName(MeshDim dim) {
  constexpr std::array<absl::string_view, kMeshDims + 1> kNames = {"pp", "dp_replicate",
                                                                   "dp_shard", "cp", "tp", "ep"};
  return kNames[static_cast<int>(dim)];
}

struct MeshShape {
  std::array<int, kMeshDims> degrees = {1, 1, 1, 1, 1};
  // ep: divides dp_shard x cp; not a factor of the world size.
  int expert_degree = 1;
  int degree(MeshDim dim) const {
    return dim == MeshDim::kEp ? expert_degree : degrees[static_cast<int>(dim)];
  }
  int world_size() const {
    int n = 1;
    for (int d : degrees) n *= d;
    return n;
  }
};

class DeviceMesh {
 public:
  virtual ~DeviceMesh() = default;
  virtual const MeshShape& shape() const = 0;
  // This rank's coordinate along a dimension, in [0, degree).
  virtual int coordinate(MeshDim dim) const = 0;
  // The ranks that differ from this one only along `dim`. group(kEp): expert parallelism splits
  // group_with_context(kDpShard) into runs of ep consecutive ranks; this rank's run holds every
  // expert between its ranks (this rank alone without expert parallelism).
  virtual Communicator& group(MeshDim dim) = 0;
  // The ranks that differ from this one only along `dim` or cp, ordered by (dim, cp) coordinate:
  // TorchTitan's flattened dp_shard_cp and dp_replicate_cp. Context-parallel ranks hold other
  // tokens of the same sequences, so a data-parallel plugin averages its gradients (and fsdp
  // shards its parameters) over this group; with one cp rank it is group(dim).
  virtual Communicator& group_with_context(MeshDim dim) = 0;
  // The ranks of group_with_context(kDpShard) at this rank's place in every ep run: they hold the
  // same experts, and fsdp shards those over them (TorchTitan's efsdp). Without expert
  // parallelism it is group_with_context(kDpShard).
  virtual Communicator& expert_shard_group() = 0;
  virtual Communicator& world() = 0;
  // The device this rank computes on: the model's tensors and every buffer a parallel plugin
  // keeps live in its memory, and device().compute() runs the kernels.
  virtual DevicePlugin& device() = 0;
};

}  // namespace titan

#endif  // TITAN_DEVICE_MESH_H_
