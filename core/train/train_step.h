// One optimizer step: the microbatches' gradients summed and averaged (global batch = local batch
// x accumulation steps x data-parallel ranks, the data-parallel plugin averaging across ranks),
// clipped by global norm, checked for NaN/Inf, then the optimizer's update with the scheduled lr.
// The optimizer updates the model's flat buffers, or this rank's shard when a parallel plugin
// keeps the parameters (ParameterShardsRole: fsdp, tp). Its state lives in an arena, one tensor
// per state slot, so a checkpoint saves and restores it (core/tensor/arena_file.h).
#ifndef TITAN_CORE_TRAIN_TRAIN_STEP_H_
#define TITAN_CORE_TRAIN_TRAIN_STEP_H_

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/fault_tolerance/replica_groups.h"
#include "core/model/decoder_model.h"
#include "core/tensor/arena.h"
#include "titan/optimizer.h"
#include "titan/parallel.h"

namespace titan {

struct StepResult {
  double loss = 0;  // mean over the microbatches
  // Under pipeline parallelism: the schedule's wall time and this rank's compute within it,
  // summed over the step's accumulation steps, and the schedule's theoretical bubble.
  PipelineStepStats pipeline;
  double grad_norm = 0;  // global L2 norm of the averaged gradients, before clipping
                         // (each parameter counted once, however many ranks hold a copy)
  // A mixture of experts' (empty without): the tokens each expert received this step, summed over
  // this rank's layers with experts and over the ranks that saw other tokens, and the largest
  // ratio of an expert's load to the mean load in any of those layers.
  std::vector<int64_t> expert_tokens;
  double expert_imbalance = 0;
  // The sequence-wise auxiliary loss (model.moe_aux_loss_alpha > 0; else nullopt): summed over
  // the layers, averaged over the microbatches and ranks as the loss is.
  std::optional<double> aux_loss;
};

// Fills tokens and targets, each [batch, seq_len], with the next microbatch.
using NextMicrobatch = std::function<void(int32_t* tokens, int32_t* targets)>;

// How a step's gradients and loss are shared across ranks, by the roles of the parallel plugins
// applied to the model; the default is one rank.
struct DataParallelContext {
  // ddp or fsdp: averages the gradients across its ranks.
  DataParallelRole* data_parallel = nullptr;
  Communicator* loss_group = nullptr;  // the ranks whose losses average into the step's loss
  // The ranks that hold the same layers and saw other tokens, as groups whose sums add up to
  // theirs (dp_shard with cp, then dp_replicate): the experts' loads are summed over them.
  std::vector<Communicator*> token_groups;
  // The plugins that keep parameters in flat buffers of their own (ParameterShardsRole), the
  // last applied first (fsdp, then tp): the optimizer updates the first one's buffers, and each
  // one's ranks' gradients add up to the whole model's.
  std::vector<ParallelPlugin*> parameter_keepers;
  // pp, applied first: its schedule runs each local batch as `pipeline_microbatches`
  // microbatches through the stages; the losses come from the last stage's rank and the
  // gradient norm adds up over `pipeline_group` (each rank holds other parameters).
  PipelineRole* pipeline = nullptr;
  Communicator* pipeline_group = nullptr;
  int64_t pipeline_microbatches = 1;
  // cp: its ranks hold other tokens of the same sequences, so their gradients are averaged over
  // it here when no data-parallel plugin does (fsdp and ddp reduce over their dimension
  // flattened with cp: DeviceMesh::group_with_context).
  Communicator* context_group = nullptr;
  // float8.precompute_float8_dynamic_scale_for_fsdp: after each optimizer step, this plugin
  // (fsdp) computes every float8-gathered weight's scale in one pass; null: none does.
  Float8GatherRole* float8_scales = nullptr;
  // fault_tolerance.enable: once this group has reduced them, the gradients and the loss are
  // averaged over the replica groups of the step's quorum; null: this launch is the whole job.
  ReplicaGroups* replica_groups = nullptr;
};

class TrainStep {
 public:
  static absl::StatusOr<TrainStep> Create(DecoderModel& model, OptimizerPlugin& optimizer,
                                          int64_t batch, int64_t seq_len, int64_t accumulation,
                                          double max_norm, DataParallelContext dp = {});

  // Runs optimizer step `step` (1 on the first); a non-finite loss or gradient norm is an error
  // naming the step, and leaves the parameters as they were.
  absl::StatusOr<StepResult> Run(int64_t step, double lr, const NextMicrobatch& next);

  // exp_avg, exp_avg_sq, ... each as long as the flat parameter buffer the optimizer updates.
  const Arena& optimizer_state() const { return state_; }
  // The flat parameters the optimizer updates; each state slot is laid out alike.
  const float* flat_params() const { return params_; }
  // DiLoCo's outer state (fault_tolerance.semi_sync_method = "diloco"; no slots otherwise): the
  // parameters of the last sync and the outer SGD's momentum buffer, each laid out as the flat
  // parameters, so that checkpoints and rejoins carry them as they carry the optimizer's.
  const Arena& outer_state() const { return outer_state_; }
  // Starts the outer state from the parameters as they are, where none was restored (a fresh
  // run, an import, a checkpoint without optimizer state).
  absl::Status StartOuterState();
  // Bytes of parameters, gradients and optimizer state this rank keeps between steps.
  int64_t state_bytes() const;

 private:
  TrainStep() = default;
  absl::Status ReduceLoss(double& loss) const;
  // One local batch through the pipeline schedule; returns its mean loss on this rank's part
  // of the pipeline (0 where the last stage is elsewhere).
  absl::StatusOr<double> RunPipeline(bool last_accumulation, const NextMicrobatch& next,
                                     PipelineStepStats& stats);
  absl::StatusOr<double> GradNorm() const;
  // The step's expert loads, summed over the token groups, into `result`; the model's experts'
  // bias moved by them (TorchTitan's optimizer pre-hook).
  absl::Status BalanceExperts(StepResult& result);
  // A flat f32 view on the compute's device.
  TensorView Flat(float* data, int64_t count) const;
  // After the optimizer's update of a step that syncs under semi_sync_method: LocalSGD's
  // parameter average or DiLoCo's outer step, over the replica groups; `loss` becomes theirs.
  absl::Status SyncReplicaGroups(int64_t step, double& loss);
  absl::Status DilocoSync(int64_t step, double& loss);

  DecoderModel* model_ = nullptr;
  OptimizerPlugin* optimizer_ = nullptr;
  Compute* compute_ = nullptr;
  DataParallelContext dp_;
  float* params_ = nullptr;  // the flat buffers the optimizer updates
  float* grads_ = nullptr;
  int64_t count_ = 0;
  int64_t batch_ = 0, seq_len_ = 0, accumulation_ = 1;
  double max_norm_ = 0;
  std::vector<ParamSegment> segments_;
  Arena state_;
  Arena outer_state_;  // DiLoCo's: synced parameters, momentum buffer
  Arena norm_parts_;   // the squared gradient norm as two f32s, on the device
  std::vector<int32_t> tokens_, targets_;
};

// Scales `grads` so their global L2 norm is at most max_norm (0: no clipping), as
// torch.nn.utils.clip_grad_norm_ does; returns the norm before clipping. `scratch` is two f32 on
// the compute's device.
absl::StatusOr<double> ClipGradNorm(Compute& compute, const TensorView& grads,
                                    const TensorView& scratch, double max_norm);
// The scaling, once the global norm of gradients sharded across ranks is known.
absl::Status ClipToNorm(Compute& compute, const TensorView& grads, double norm, double max_norm);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_TRAIN_STEP_H_
