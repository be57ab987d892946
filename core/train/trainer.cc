#include "core/train/trainer.h"

#include "core/train/training_job.h"

namespace titan {

absl::Status Train(JobPlan& plan, DeviceMesh& mesh) {
  TrainingJob job(plan, mesh);
  TITAN_RETURN_IF_ERROR(JoinReplicaGroups(job));
  TITAN_RETURN_IF_ERROR(LoadData(job));
  TITAN_RETURN_IF_ERROR(BuildModel(job));
  TITAN_RETURN_IF_ERROR(ApplyParallelism(job));
  TITAN_RETURN_IF_ERROR(LoadOrInit(job));
  TITAN_ASSIGN_OR_RETURN(const StepsOutcome outcome, RunSteps(job));
  return SaveAndSample(job, outcome);
}

}  // namespace titan
