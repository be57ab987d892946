// Which blocks each pipeline stage holds, as TorchTitan splits a Llama: the embedding counts as
// `first_less` blocks of work on stage 0 and the output as `last_less` on the last stage, and the
// work is spread evenly (the first stages take one more where it does not divide).
#ifndef TITAN_PLUGINS_PARALLEL_PP_STAGE_SPLIT_H_
#define TITAN_PLUGINS_PARALLEL_PP_STAGE_SPLIT_H_

#include <vector>

#include "titan/pipeline.h"

namespace titan::pp {

// Every stage's layers, in stage order.
absl::StatusOr<std::vector<PipelineStage>> SplitLayers(int n_layers, int num_stages, int first_less,
                                                       int last_less);

// The number of stages for `layers_per_stage` (TorchTitan's pipeline_parallel_layers_per_stage):
// ceil((n_layers + first_less + last_less) / layers_per_stage).
int StagesFor(int n_layers, int layers_per_stage, int first_less, int last_less);

// Every message between two pp ranks carries its own tag (stage, microbatch, direction), and MPI
// promises tags up to 32767: stages x microbatches may be at most 16383.
absl::Status CheckMessageTags(int stages, int microbatches);

}  // namespace titan::pp

#endif  // TITAN_PLUGINS_PARALLEL_PP_STAGE_SPLIT_H_
