// What Save and Load need from a Communicator beyond its calls: agreeing on an outcome, so no
// rank waits for a peer that gave up, and moving bytes of any length.
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_COLLECTIVE_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_COLLECTIVE_H_

#include <string>
#include <vector>

#include "titan/communicator.h"
#include "titan/status.h"

namespace titan::safetensors {

// Collective: OK on every rank when `local` is OK on every rank; otherwise every rank returns
// the error of the lowest failing rank, prefixed with that rank on the others.
absl::Status AgreeOnStatus(const absl::Status& local, Communicator& comm);

// Collective: `status` of rank `root`, on every rank.
absl::Status BroadcastStatus(const absl::Status& status, int root, Communicator& comm);

// Collective: every rank's `bytes` on rank 0, in rank order; empty on the other ranks.
absl::StatusOr<std::vector<std::string>> GatherToRoot(const std::string& bytes, Communicator& comm);

// Point-to-point, in chunks that fit a message: `count` elements of `dtype`.
absl::Status SendElements(const void* data, DType dtype, int64_t count, int peer, int tag,
                          Communicator& comm);
absl::Status RecvElements(void* data, DType dtype, int64_t count, int peer, int tag,
                          Communicator& comm);

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_COLLECTIVE_H_
