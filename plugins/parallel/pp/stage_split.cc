#include "plugins/parallel/pp/stage_split.h"

#include "absl/strings/str_cat.h"

namespace titan::pp {

absl::StatusOr<std::vector<PipelineStage>> SplitLayers(int n_layers, int num_stages, int first_less,
                                                       int last_less) {
  const int units = n_layers + first_less + last_less;
  if (num_stages < 1 || first_less < 0 || last_less < 0 || units < num_stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline split: ", n_layers, " layers (+ ", first_less, " for the embedding, + ",
        last_less, " for the output) cannot fill ", num_stages, " stages of at least one each"));
  }
  std::vector<PipelineStage> stages;
  int layer = 0;
  for (int s = 0; s < num_stages; ++s) {
    int count = units / num_stages + (s < units % num_stages ? 1 : 0);
    if (s == 0) count -= first_less;
    if (s == num_stages - 1) count -= last_less;
    if (count < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline split: stage ", s, " of ", num_stages, " would hold ", count,
                       " layers (", n_layers, " layers; first_stage_less_layers ", first_less,
                       ", last_stage_less_layers ", last_less, ")"));
    }
    stages.push_back({s, layer, layer + count});
    layer += count;
  }
  if (layer != n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline split: the stages hold ", layer, " of ", n_layers, " layers"));
  }
  return stages;
}

int StagesFor(int n_layers, int layers_per_stage, int first_less, int last_less) {
  const int units = n_layers + first_less + last_less;
  return (units + layers_per_stage - 1) / layers_per_stage;
}

absl::Status CheckMessageTags(int stages, int microbatches) {
  const int64_t tags = 2 * int64_t{stages} * microbatches;
  if (tags > 32767) {
    return absl::InvalidArgumentError(absl::StrCat(
        stages, " stages x ", microbatches, " microbatches need ", tags,
        " message tags, more than the 32767 MPI guarantees; use fewer microbatches (a larger "
        "parallelism.pipeline_parallel_microbatch_size)"));
  }
  return absl::OkStatus();
}

}  // namespace titan::pp
