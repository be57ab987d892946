// The per-rank compute actions of each named schedule; Generate (schedule.cc) checks the
// arguments and places the stages first.
#ifndef TITAN_PLUGINS_PARALLEL_PP_SCHEDULE_GENERATORS_H_
#define TITAN_PLUGINS_PARALLEL_PP_SCHEDULE_GENERATORS_H_

#include <vector>

#include "plugins/parallel/pp/schedule.h"

namespace titan::pp {

struct GeneratorInput {
  int ranks = 0;
  int stages_per_rank = 0;
  int microbatches = 0;
};

// Each appends rank `rank`'s actions to `out`, in the order the rank runs them.
void GPipeRank(const GeneratorInput& in, int rank, std::vector<Action>& out);
void OneFOneBRank(const GeneratorInput& in, int rank, std::vector<Action>& out);
void LoopedBfsRank(const GeneratorInput& in, int rank, std::vector<Action>& out);
// Interleaved1F1B, or InterleavedZeroBubble (ZB1P) with `zero_bubble`.
void InterleavedRank(const GeneratorInput& in, int rank, bool zero_bubble,
                     std::vector<Action>& out);
void ZbvRank(const GeneratorInput& in, int rank, std::vector<Action>& out);
void DualPipeVRank(const GeneratorInput& in, int rank, std::vector<Action>& out);

}  // namespace titan::pp

#endif  // TITAN_PLUGINS_PARALLEL_PP_SCHEDULE_GENERATORS_H_
