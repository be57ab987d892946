// Pipeline parallelism between the model and the pp plugin. The plugin decides which stages
// (runs of consecutive blocks) each pp rank holds (PipelinePlan), the core builds a model of
// just those blocks, and the plugin runs each step's schedule by calling the stage operations
// below and moving what they produce between ranks.
#ifndef TITAN_PIPELINE_H_
#define TITAN_PIPELINE_H_

#include <vector>

#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan {

// Stage `stage` holds blocks [first_layer, end_layer); stage 0 also the embedding, the last
// stage the final norm, the output projection and the loss.
struct PipelineStage {
  int stage = 0;
  int first_layer = 0;
  int end_layer = 0;
};

struct PipelinePlan {
  int num_stages = 1;                // in the whole pipeline
  std::vector<PipelineStage> local;  // the stages this rank runs, in stage order
};

// A model split into pipeline stages; microbatch m of the current step is given to the model
// before the schedule runs. The tensors that travel between stages are the residual stream of a
// microbatch at a stage boundary, f32 on the model's device, the same shape on every rank.
class PipelineStageTarget {
 public:
  virtual ~PipelineStageTarget() = default;
  virtual int num_microbatches() const = 0;
  // Where a stage's input is received (not stage 0) and its output is read after Forward (not
  // the last stage).
  virtual absl::StatusOr<TensorView> StageInput(int stage, int microbatch) = 0;
  virtual absl::StatusOr<TensorView> StageOutput(int stage, int microbatch) = 0;
  // Where the gradient of a stage's output is received (not the last stage) and the gradient of
  // its input is read after Backward or BackwardInput (not stage 0).
  virtual absl::StatusOr<TensorView> OutputGrad(int stage, int microbatch) = 0;
  virtual absl::StatusOr<TensorView> InputGrad(int stage, int microbatch) = 0;
  virtual absl::Status Forward(int stage, int microbatch) = 0;
  // Input and weight gradients together.
  virtual absl::Status Backward(int stage, int microbatch) = 0;
  // The zero-bubble split: the input gradient first, the weight gradients later.
  virtual absl::Status BackwardInput(int stage, int microbatch) = 0;
  virtual absl::Status BackwardWeight(int stage, int microbatch) = 0;
};

// What one step's schedule cost on this rank.
struct PipelineStepStats {
  double step_seconds = 0;        // the schedule, wall clock
  double compute_seconds = 0;     // in F, B, I and W actions
  double theoretical_bubble = 0;  // the schedule's idle fraction with F=1, B=2, I=W=1
};

}  // namespace titan

#endif  // TITAN_PIPELINE_H_
