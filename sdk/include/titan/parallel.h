// `parallel` plugins: one per mesh dimension (fsdp, ddp, tp, pp, cp). Each transforms the
// model for its dimension by substituting modules, adding hooks, or replacing the schedule.
// Beyond that, a plugin takes on only the roles its dimension needs: each role is an interface
// below, which the plugin implements and hands out through ParallelPlugin's accessor for it (null
// for the roles it does not take). The core asks for a role and acts on it, never on a plugin's
// name or on methods a plugin does not implement.
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

// Averages the gradients across the ranks of its dimension (fsdp, ddp). Its dimension is
// flattened with cp (DeviceMesh::group_with_context), so the train step leaves the cp ranks'
// gradients to it.
class DataParallelRole {
 public:
  // Whether the coming backward must reduce gradients across ranks; false for all but the last
  // microbatch of a step under gradient accumulation (a plugin may reduce anyway).
  virtual void set_requires_gradient_sync(bool sync) = 0;
  // Returns once the gradients of every backward so far are reduced.
  virtual absl::Status WaitForGradients() = 0;

 protected:
  ~DataParallelRole() = default;  // owned as the plugin, never through the role
};

// The flat f32 buffers this rank's optimizer updates when a plugin keeps the parameters
// itself (fsdp: this rank's shard of every parameter, back to back).
struct LocalParameters {
  TensorView params;
  TensorView grads;  // same length; holds the reduced gradients once WaitForGradients returns
  std::vector<ParamSegment> segments;
};

// Keeps this rank's part of the parameters in flat buffers of its own (tp, and fsdp sharding
// further what tp left), which the optimizer updates in place of the model's.
class ParameterShardsRole {
 public:
  // This rank's part; nothing before Apply.
  virtual std::optional<LocalParameters> local_parameters() = 0;
  // The group whose ranks' local gradients together make up the global gradient (their squared
  // norms add up); null when every rank holds all of it.
  virtual Communicator* gradient_shard_group() = 0;

 protected:
  ~ParameterShardsRole() = default;
};

// Undoes its layout for good, so that every rank holds the whole model until the process ends
// (for export and text generation after training): fsdp and tp gather the parameters, cp gives
// the attention whole sequences again. Collective.
class UnshardingRole {
 public:
  virtual absl::Status Unshard() = 0;

 protected:
  ~UnshardingRole() = default;
};

// Gathers Float8 weights in e4m3 (fsdp with float8.enable_fsdp_float8_all_gather), and can
// compute their scales ahead (TorchTitan's precompute_float8_dynamic_scale_for_fsdp).
class Float8GatherRole {
 public:
  // The amaxes of every kF8E4M3 parameter (titan/module.h) in one pass and one all-reduce,
  // which the gathers use until the parameters change (the next WaitForGradients); without it
  // each unit's gather reduces its own. Called after each optimizer step. Collective.
  virtual absl::Status PrecomputeFloat8Scales() = 0;

 protected:
  ~Float8GatherRole() = default;
};

struct PipelineStepOptions {
  bool forward_only = false;  // validation: every stage's forward, no gradients
  // Told before each backward whether it must reduce gradients: only the last microbatch's
  // backwards do, when `sync_gradients` (the last accumulation step) holds.
  DataParallelRole* data_parallel = nullptr;
  bool sync_gradients = true;
};

// Splits the model into pipeline stages and runs each step's schedule over them (pp).
class PipelineRole {
 public:
  // Which stages this rank holds of a model of `n_layers` blocks, for steps of `microbatches`
  // microbatches; asked before the model is built, which then holds only those blocks (global
  // names kept).
  virtual absl::StatusOr<PipelinePlan> PlanPipeline(int n_layers, int microbatches,
                                                    DeviceMesh& mesh) = 0;
  // Runs this rank's actions of one step's schedule over the microbatches the model holds,
  // replacing the forward/backward loop of the step.
  virtual absl::StatusOr<PipelineStepStats> RunSchedule(const PipelineStepOptions& options) = 0;

 protected:
  ~PipelineRole() = default;
};

class ParallelPlugin : public Plugin {
 public:
  // The mesh dimension this plugin implements.
  virtual MeshDim dimension() const = 0;
  // Applies the transformation to the model in place; called in TorchTitan's order
  // (pp, tp, float8, activation checkpointing, fsdp/ddp), after the model is initialized and
  // before the first forward.
  virtual absl::Status Apply(Module& model, DeviceMesh& mesh) = 0;

  // The roles this plugin takes (each valid as long as the plugin), null for the others.
  virtual DataParallelRole* data_parallel() { return nullptr; }
  virtual ParameterShardsRole* parameter_shards() { return nullptr; }
  virtual UnshardingRole* unsharding() { return nullptr; }
  virtual Float8GatherRole* float8_gather() { return nullptr; }
  virtual PipelineRole* pipeline() { return nullptr; }
};

template <>
struct PluginKind<ParallelPlugin> {
  static constexpr const char* kName = "parallel";
};

}  // namespace titan

#endif  // TITAN_PARALLEL_H_
