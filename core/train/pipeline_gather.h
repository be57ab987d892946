// After a pipeline-parallel run every pp rank holds only its stages; saving model.arena and
// sampling need the whole model on the lead.
#ifndef TITAN_CORE_TRAIN_PIPELINE_GATHER_H_
#define TITAN_CORE_TRAIN_PIPELINE_GATHER_H_

#include <memory>

#include "core/model/decoder_model.h"
#include "titan/communicator.h"

namespace titan {

// Collective over `pp_group`, whose ranks hold the stages of one pipeline with whole
// (unsharded) parameters: rank 0 of the group gets the whole model, built with `ac` and
// `where`; the others get null. Each parameter travels as a sum in which only its owner's
// values are not zero, so the values arrive exactly.
absl::StatusOr<std::unique_ptr<DecoderModel>> GatherPipelineModel(const DecoderModel& stage_model,
                                                                  Communicator& pp_group,
                                                                  const ActivationCheckpoint& ac,
                                                                  const ModelCompute& where);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_PIPELINE_GATHER_H_
