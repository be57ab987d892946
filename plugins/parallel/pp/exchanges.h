// How a lowered schedule's sends and receives run: each run of consecutive communication
// actions of a rank is one grouped exchange (Communicator::Exchange), posted together and
// completed together, as PyTorch's batch_isend_irecv does. Over NCCL that is what lets two
// ranks send to each other at once (1F1B's forward going down while a gradient comes up): one
// ncclGroupStart/ncclGroupEnd holds both directions, where separate calls would each wait, in
// issue order, for the peer's call that sits behind its own.
#ifndef TITAN_PLUGINS_PARALLEL_PP_EXCHANGES_H_
#define TITAN_PLUGINS_PARALLEL_PP_EXCHANGES_H_

#include <vector>

#include "plugins/parallel/pp/schedule.h"
#include "titan/status.h"

namespace titan::pp {

// The tag of the activation entering `stage` (or, with `gradient`, of the gradient leaving it)
// for `microbatch`: what tells the messages between two ranks apart.
int MessageTag(int stage, int microbatch, int microbatches, bool gradient);

// One rank's actions cut into steps: a compute action alone, or a run of sends and receives
// (indices into the rank's action list, in order).
struct ExchangeStep {
  bool exchange = false;
  std::vector<int> actions;
};
std::vector<ExchangeStep> GroupExchanges(const std::vector<Action>& actions);

// Proves that a lowered schedule (one that passed Check) runs with its communication grouped
// as above on a communicator that blocks a rank at each exchange until every message of it has
// met its partner in the peer's exchange under way (NCCL, whose exchanges run in order on one
// stream; MPI blocks less). It also proves that pairing the k-th send from rank a to rank b with
// b's k-th receive from a gives every message its own partner, as NCCL, which has no tags,
// pairs them. The error names the rank, the action and what it waits for.
absl::Status CheckExchanges(const Schedule& lowered);

}  // namespace titan::pp

#endif  // TITAN_PLUGINS_PARALLEL_PP_EXCHANGES_H_
