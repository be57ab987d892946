// The training run of a job plan on this rank of `mesh`, as a sequence of phases
// (training_job.h): the data (tokenizer loaded or learned, packed windows with a validation
// split), the model of this rank's pipeline stages, its parallel transformations and train step,
// the checkpoint it resumes from, the step loop (accumulation, clipping, LR schedule, NaN/Inf
// stop, metrics, periodic validation, checkpoints), then the whole model saved and a text
// sample. Rank 0 logs the metrics, saves the model and samples.
#ifndef TITAN_CORE_TRAIN_TRAINER_H_
#define TITAN_CORE_TRAIN_TRAINER_H_

#include "core/train/job_plan.h"
#include "titan/device_mesh.h"

namespace titan {

// `plan` was built for `mesh`'s shape; the run uses its plugins and fills in what only the data
// decides (the vocabulary).
absl::Status Train(JobPlan& plan, DeviceMesh& mesh);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_TRAINER_H_
