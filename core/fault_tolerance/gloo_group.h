// The communicator across replica groups: a Gloo context (Debian's libgloo, its TCP transport)
// over the ranks of one quorum that hold the same piece of the model, one from each group. Its
// rendezvous is in the quorum's store (a folder or etcd), under "gloo/"; a new quorum gets a new
// context under a prefix of its own. Gloo's errors (a peer gone, a timeout) are returned as
// statuses, so that the caller can redo the step with the survivors.
#ifndef TITAN_CORE_FAULT_TOLERANCE_GLOO_GROUP_H_
#define TITAN_CORE_FAULT_TOLERANCE_GLOO_GROUP_H_

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "core/fault_tolerance/quorum_store.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace titan {

class GlooGroup {
 public:
  // Connects rank `rank` of `size` through `store` under `prefix` (the same on every member,
  // new for every context); `timeout` bounds the connection and each collective.
  static absl::StatusOr<std::unique_ptr<GlooGroup>> Connect(QuorumStore& store,
                                                            const std::string& prefix, int rank,
                                                            int size,
                                                            std::chrono::milliseconds timeout);
  ~GlooGroup();

  // Sums `values` over the members, in place.
  absl::Status AllReduceSum(std::span<float> values);
  // `bytes` at `data` of member `root` into every member's `data`.
  absl::Status Broadcast(void* data, size_t bytes, int root);

 private:
  GlooGroup() = default;
  std::shared_ptr<gloo::Context> context_;
  std::chrono::milliseconds timeout_{0};
};

}  // namespace titan

#endif  // TITAN_CORE_FAULT_TOLERANCE_GLOO_GROUP_H_
