// The replica_groups part: fault tolerance's groups on a GPU, whose gradients cross the groups
// through host memory (Gloo's TCP transport). Two groups of one rank share the GPU; group 1 is
// killed in step 4's round, after joining its quorum: group 0 must redo that step alone and
// finish every step, the two having logged the same (averaged) losses while both lived.
#ifndef TITAN_TOOLS_GPU_PROOF_REPLICA_GROUPS_H_
#define TITAN_TOOLS_GPU_PROOF_REPLICA_GROUPS_H_

#include <string>
#include <vector>

#include "tools/gpu_proof/context.h"

namespace titan::gpu_proof {

inline constexpr int kReplicaGroupSteps = 8;
inline constexpr int kReplicaGroupKilledAt = 4;

// A /bin/sh script that starts each command in the background, its output in `logs[g]`, waits
// for them in turn and writes each one's exit status into `exits[g]`.
std::string BackgroundScript(const std::vector<std::vector<std::string>>& commands,
                             const std::vector<std::string>& logs,
                             const std::vector<std::string>& exits);

PartOutcome ReplicaGroupsPart(const Context& context);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_REPLICA_GROUPS_H_
