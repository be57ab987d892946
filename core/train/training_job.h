// What a training run builds from its job plan on this rank, phase by phase (trainer.cc runs
// them in order): the data, the model and its parallel transformations, the train step, the
// checkpoint it resumes from, then the steps, and at the end the saved model and a sample.
#ifndef TITAN_CORE_TRAIN_TRAINING_JOB_H_
#define TITAN_CORE_TRAIN_TRAINING_JOB_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "core/model/decoder_model.h"
#include "core/train/checkpointer.h"
#include "core/train/job_plan.h"
#include "core/train/metrics.h"
#include "core/train/train_step.h"
#include "core/train/training_data.h"
#include "titan/device_mesh.h"

namespace titan {

struct TrainingJob {
  TrainingJob(JobPlan& plan, DeviceMesh& mesh) : plan(plan), mesh(mesh) {}

  JobPlan& plan;
  DeviceMesh& mesh;
  bool lead() const { return mesh.world().rank() == 0; }  // logs metrics, saves and samples
  // Across the whole job: under fault tolerance each replica group reads its own part of the
  // data, as the same ranks of one launch would.
  int data_parallel_rank() const;
  int data_parallel_degree() const;

  std::optional<TrainingData> data;            // set by LoadData
  ModelCompute where;                          // the mesh's device, the plan's matmul dtype
  std::unique_ptr<Checkpointer> checkpointer;  // null when checkpoint.enable is off
  std::unique_ptr<DecoderModel> model;
  std::optional<TrainStep> train_step;
  ResumePoint resume;
  std::optional<MetricsLog> metrics;  // rank 0's metrics.jsonl, TensorBoard files where written
  std::unique_ptr<ReplicaGroups> replica_groups;  // null unless fault_tolerance.enable
};

// What a checkpoint saves and restores of the job.
TrainState TrainStateOf(TrainingJob& job);

// How the steps ended.
struct StepsOutcome {
  int64_t trained = 0;        // the last step trained
  int64_t stopped_after = 0;  // the step after which a stop signal ended the run; 0: none
  absl::Status saved;         // the checkpoint saves' outcome: the ranks agree on it
  std::chrono::steady_clock::time_point start;
};

// fault_tolerance.enable: joins the job's replica groups (the lead's heartbeat starts here,
// before the data and the model take their time).
absl::Status JoinReplicaGroups(TrainingJob& job);
// Reads or tokenizes the data and loads or learns the tokenizer; the vocabulary goes into the
// model's shape. Refuses a global batch the data cannot fill.
absl::Status LoadData(TrainingJob& job);
// The checkpoint the run starts from decides details of the model's shape; under pp the plugin
// places this rank's stages; then the model of those stages, Float8 layers where the recipe
// asks, initialized from debug.seed.
absl::Status BuildModel(TrainingJob& job);
// pp split, tp, cp, then fsdp or ddp over the tp-local tensors (TorchTitan's order), and the
// train step over what they leave on this rank.
absl::Status ApplyParallelism(TrainingJob& job);
// Resumes from the latest checkpoint (or initial_load_path) when there is one.
absl::Status LoadOrInit(TrainingJob& job);
// The step loop: metrics, periodic validation, checkpoints, the control plane and stop signals.
absl::StatusOr<StepsOutcome> RunSteps(TrainingJob& job);
// Every rank gathers the whole model; the lead saves model.arena and samples text. Returns the
// run's outcome: a failed save, or Cancelled after a stop signal.
absl::Status SaveAndSample(TrainingJob& job, const StepsOutcome& outcome);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_TRAINING_JOB_H_
