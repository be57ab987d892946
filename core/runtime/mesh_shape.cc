#include "core/runtime/mesh_shape.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace titan {
namespace {

constexpr const char* kDegreeKeys[kMeshDims] = {
    "pipeline_parallel_degree", "data_parallel_replicate_degree", "data_parallel_shard_degree",
    "context_parallel_degree", "tensor_parallel_degree"};

std::string Ranks(int n) { return absl::StrCat(n, n == 1 ? " rank was" : " ranks were"); }

}  // namespace

absl::StatusOr<int> RanksOfDegrees(const ConfigView& parallelism) {
  int64_t product = 1;
  for (const char* key : kDegreeKeys) {
    TITAN_ASSIGN_OR_RETURN(int64_t degree, parallelism.GetInt(key));
    // data_parallel_shard_degree = -1 counts as the fewest shards expert parallelism can borrow
    // from: expert_parallel_degree must divide dp_shard x cp.
    if (degree == -1 && parallelism.Has("expert_parallel_degree")) {
      TITAN_ASSIGN_OR_RETURN(int64_t ep, parallelism.GetInt("expert_parallel_degree"));
      TITAN_ASSIGN_OR_RETURN(int64_t cp, parallelism.GetInt("context_parallel_degree"));
      degree = ep / std::gcd(ep, std::max<int64_t>(cp, 1));
    }
    product *= std::max<int64_t>(degree, 1);  // each at most 2^20 by the schema: no overflow
    if (product > std::numeric_limits<int>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("[parallelism]: the degrees multiply to more than the limit of ",
                       std::numeric_limits<int>::max(), " ranks"));
    }
  }
  return static_cast<int>(product);
}

absl::StatusOr<MeshShape> InferMeshShape(const ConfigView& parallelism, int world_size) {
  MeshShape shape;
  for (int dim = 0; dim < kMeshDims; ++dim) {
    TITAN_ASSIGN_OR_RETURN(int64_t degree, parallelism.GetInt(kDegreeKeys[dim]));
    shape.degrees[dim] = static_cast<int>(degree);
  }
  TITAN_RETURN_IF_ERROR(RanksOfDegrees(parallelism).status());
  constexpr int kShard = static_cast<int>(MeshDim::kDpShard);
  if (shape.degrees[kShard] == -1) {
    shape.degrees[kShard] = 1;
    int others = shape.world_size();
    if (world_size % others != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[parallelism]: data_parallel_shard_degree = -1 takes the ranks the other degrees "
          "leave, but pp*dp_replicate*cp*tp = ",
          others, " does not divide the ", world_size, " launched ranks"));
    }
    shape.degrees[kShard] = world_size / others;
  } else if (shape.degrees[kShard] < 1) {
    return parallelism.Error(kDegreeKeys[kShard], "must be -1 or at least 1");
  }
  if (shape.world_size() != world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("[parallelism]: pp*dp_replicate*dp_shard*cp*tp = ", shape.degree(MeshDim::kPp),
                     "*", shape.degree(MeshDim::kDpReplicate), "*", shape.degree(MeshDim::kDpShard),
                     "*", shape.degree(MeshDim::kCp), "*", shape.degree(MeshDim::kTp), " = ",
                     shape.world_size(), ", but ", Ranks(world_size), " launched"));
  }
  if (parallelism.Has("expert_parallel_degree")) {
    TITAN_ASSIGN_OR_RETURN(int64_t experts, parallelism.GetInt("expert_parallel_degree"));
    shape.expert_degree = static_cast<int>(experts);
  }
  const int data = shape.degree(MeshDim::kDpShard) * shape.degree(MeshDim::kCp);
  if (data % shape.expert_degree != 0) {
    return parallelism.Error(
        "expert_parallel_degree",
        absl::StrCat(shape.expert_degree,
                     " must divide dp_shard x cp = ", shape.degree(MeshDim::kDpShard), " x ",
                     shape.degree(MeshDim::kCp), ", whose ranks expert parallelism borrows"));
  }
  return shape;
}

}  // namespace titan
