#ifndef TITAN_CORE_RUNTIME_MESH_SHAPE_H_
#define TITAN_CORE_RUNTIME_MESH_SHAPE_H_

#include "titan/config_view.h"
#include "titan/device_mesh.h"
#include "titan/status.h"

namespace titan {

// The mesh degrees from the recipe's [parallelism] section for `world_size` ranks; a
// data_parallel_shard_degree of -1 takes the ranks the other degrees leave.
// The product of the [parallelism] degrees, a data_parallel_shard_degree of -1 counted as 1 (as
// the fewest shards that expert_parallel_degree divides with cp, under expert parallelism); an
// error where it exceeds an int.
absl::StatusOr<int> RanksOfDegrees(const ConfigView& parallelism);

absl::StatusOr<MeshShape> InferMeshShape(const ConfigView& parallelism, int world_size);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_MESH_SHAPE_H_
