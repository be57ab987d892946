// `parallel` plugins: one per mesh dimension (fsdp, ddp, tp, pp, cp). Each transforms the
// model for its dimension by substituting modules, adding hooks, or replacing the schedule.
#ifndef TITAN_PARALLEL_H_
#define TITAN_PARALLEL_H_

#include <optional>
#include <vector>

#include "titan/device_mesh.h"
#include "titan/module.h"
#include "titan/optimizer.h"
#include "titan/pipeline.h"
#include "titan/plugin.h"

namespace titan {

// The flat f32 buffers this rank's optimizer updates when a plugin keeps the parameters
// itself (fsdp: this rank's shard of every parameter, back to back).
struct LocalParameters {
  TensorView params;
  TensorView grads;  // same length; holds the reduced gradients once WaitForGradients returns
  std::vector<ParamSegment> segments;
};

class ParallelPlugin;

struct PipelineStepOptions {
  bool forward_only = false;  // validation: every stage's forward, no gradients
  // Told before each backward whether it must reduce gradients: only the last microbatch's
  // backwards do, when `sync_gradients` (the last accumulation step) holds.
  ParallelPlugin* data_parallel = nullptr;
  bool sync_gradients = true;
};

class ParallelPlugin : public Plugin {
 public:
  // The mesh dimension this plugin implements.
  virtual MeshDim dimension() const = 0;
  // Applies the transformation to the model in place; called in TorchTitan's order
  // (pp, tp, float8, activation checkpointing, fsdp/ddp), after the model is initialized and
  // before the first forward.
  virtual absl::Status Apply(Module& model, DeviceMesh& mesh) = 0;

  // A data-parallel plugin (dimension dp_shard or dp_replicate) averages the gradients over its
  // dimension flattened with cp (DeviceMesh::group_with_context): the train step then leaves the
  // cp ranks' gradients to it.
  //
  // Whether the coming backward must reduce gradients across ranks; false for all but the last
  // microbatch of a step under gradient accumulation (plugins may reduce anyway).
  virtual void set_requires_gradient_sync(bool /*sync*/) {}
  // Returns once the gradients of every backward so far are reduced.
  virtual absl::Status WaitForGradients() { return absl::OkStatus(); }

  // Gathers every parameter for good, so the model holds them whole until the process ends
  // (for export and text generation after training). Collective.
  virtual absl::Status Unshard() { return absl::OkStatus(); }

  // fsdp with float8 all-gather (TorchTitan's precompute_float8_dynamic_scale_for_fsdp): the
  // amaxes of every kF8E4M3 parameter (titan/module.h) in one pass and one all-reduce, which
  // the gathers use until the parameters change (the next WaitForGradients); without it each
  // unit's gather reduces its own. Called after each optimizer step. Collective.
  virtual absl::Status PrecomputeFloat8Scales() {
    return absl::FailedPreconditionError("this parallel plugin gathers no float8 weights");
  }
  // Plugins that keep the parameters themselves (fsdp) return this rank's part, which the
  // optimizer then updates in place; the others return nothing and the model's buffers stay.
  virtual std::optional<LocalParameters> local_parameters() { return std::nullopt; }
  // The group whose ranks' local gradients together make up the global gradient (their squared
  // norms add up); null when every rank holds all of it.
  virtual Communicator* gradient_shard_group() { return nullptr; }

  // pp only. Which stages this rank holds of a model of `n_layers` blocks, for steps of
  // `microbatches` microbatches; asked before the model is built, which then holds only those
  // blocks (global names kept).
  virtual absl::StatusOr<PipelinePlan> PlanPipeline(int /*n_layers*/, int /*microbatches*/,
                                                    DeviceMesh& /*mesh*/) {
    return absl::UnimplementedError("this parallel plugin does not split the model into stages");
  }
  // pp only. Runs this rank's actions of one step's schedule over the microbatches the model
  // holds, replacing the forward/backward loop of the step.
  virtual absl::StatusOr<PipelineStepStats> RunSchedule(const PipelineStepOptions& /*options*/) {
    return absl::UnimplementedError("this parallel plugin runs no pipeline schedule");
  }
};

template <>
struct PluginKind<ParallelPlugin> {
  static constexpr const char* kName = "parallel";
};

}  // namespace titan

#endif  // TITAN_PARALLEL_H_
