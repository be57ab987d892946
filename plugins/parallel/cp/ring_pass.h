// The ring attention's communication: blocks passed from each cp rank to the next.
#ifndef TITAN_PLUGINS_PARALLEL_CP_RING_PASS_H_
#define TITAN_PLUGINS_PARALLEL_CP_RING_PASS_H_

#include <memory>
#include <vector>

#include "titan/communicator.h"

namespace titan::cp {

// Message tags of the ring on the cp group: blocks of keys and values, and their gradients.
inline constexpr int kRingBlockTag = 27000, kRingGradientTag = 27001;

using Transfers = std::vector<std::unique_ptr<Communicator::Transfer>>;

// Starts sending `send` to the next rank of `group` and receiving `receive` from the previous
// one, adding both transfers to `transfers`.
absl::Status PassAround(Communicator& group, const TensorView& send, const TensorView& receive,
                        int tag, Transfers& transfers);
// Waits for every transfer and forgets them.
absl::Status WaitAll(Transfers& transfers);

}  // namespace titan::cp

#endif  // TITAN_PLUGINS_PARALLEL_CP_RING_PASS_H_
