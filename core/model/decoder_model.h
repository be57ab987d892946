// A decoder model: a family's modules (core/model/model_family.h; Llama 3 by default) composed
// into an embedding, blocks and a head, each with a forward and a hand-written backward (llm.c
// style), over parameters and gradients that each live in one arena. The model plans the
// modules' activations once per (batch, seq_len) and reuses them every step, runs the parallel
// plugins' hooks around its modules and the pipeline's stages. Every kernel runs through the
// device's compute interface (titan/compute.h), in f32 or with bf16 matmul operands.
#ifndef TITAN_CORE_MODEL_DECODER_MODEL_H_
#define TITAN_CORE_MODEL_DECODER_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/model/activation_checkpoint.h"
#include "core/model/config.h"
#include "core/model/float8_linear.h"
#include "core/model/local_attention.h"
#include "core/model/model_family.h"
#include "core/model/module_node.h"
#include "core/model/modules/decoder_block.h"
#include "core/model/modules/output_head.h"
#include "core/model/modules/token_embedding.h"
#include "core/model/modules/weight_pass.h"
#include "core/tensor/arena.h"
#include "titan/attention.h"
#include "titan/compute.h"
#include "titan/device.h"
#include "titan/module.h"
#include "titan/pipeline.h"

namespace titan {

// Where and in what precision the model computes.
struct ModelCompute {
  DevicePlugin* device = nullptr;  // null: the CPU device built into the core
  // kF32: every matmul in f32. kBF16: matmul operands (activations and weights) rounded to bf16,
  // products accumulated in f32, as TorchTitan's mixed_precision_param = "bfloat16"; the master
  // weights, gradients, norms, softmax and the loss stay f32.
  DType matmul_dtype = DType::kF32;
};

class DecoderModel : public TensorParallelTarget,
                     public ExpertParallelTarget,
                     public PipelineStageTarget,
                     public AttentionHost {
 public:
  // With a pipeline plan, the model holds only the plan's local stages: their blocks, the
  // embedding on stage 0 and the final norm and output on the last stage, under their global
  // names. An empty plan: one stage with everything.
  static absl::StatusOr<std::unique_ptr<DecoderModel>> Create(
      const LlamaConfig& config, const ActivationCheckpoint& ac = {},
      const ModelCompute& where = {}, const PipelinePlan& stages = {},
      const ModelFamily& family = LlamaFamily());

  const LlamaConfig& config() const { return config_; }
  // Every parameter's name and shape in the whole (one-stage, one-rank) model, in arena order:
  // also those other pipeline stages hold.
  std::vector<std::pair<std::string, std::vector<int64_t>>> WholeParameterShapes() const;
  Compute& compute() const { return ctx_.compute; }
  // The device plugin holding the model's memory; null: host memory (the CPU).
  DevicePlugin* device() const { return ctx_.device; }
  DType matmul_dtype() const { return ctx_.matmul_dtype; }
  // TorchTitan's names ("layers.3.attention.wq.weight"), in one arena each for values and grads.
  // Empty once parallel plugins keep the parameters elsewhere (see ReleaseUnusedStorage).
  const Arena& params() const { return params_; }
  const Arena& grads() const { return grads_; }
  // The same tensors as the SDK's Parameters, in arena order; the model computes with whatever
  // their value and grad point at, so plugins can move them.
  const std::vector<Parameter>& Parameters() const { return ctx_.parameters; }
  // The module tree parallel plugins transform: the root holds tok_embeddings, norm and output,
  // its children are the blocks "layers.N".
  Module& root() { return root_; }
  // Frees the parameter and gradient arenas when no parameter points into them any more.
  void ReleaseUnusedStorage();
  // Writes every parameter's current value to `path` in the arena file format.
  absl::Status SaveParameters(const std::string& path) const;

  // The float8 converter (core/model/float8_linear.h): the linear layers `plugin` converts, and
  // whose shapes allow it, run their GEMMs in Float8 from now on; so do the routed experts'
  // grouped GEMMs under a rowwise recipe. Returns every linear layer's and expert weight's
  // outcome, for the log. With `gather_float8` (fsdp's float8 all-gather, tensorwise recipes
  // only) the linear layers' weights ask to be handed over quantized (Parameter::compute_dtype
  // e4m3); the experts' [experts, out, in] weights never do: they are gathered in high precision.
  absl::StatusOr<std::vector<Float8LinearChoice>> ConvertToFloat8(const Float8Plugin& plugin,
                                                                  bool gather_float8 = false);

  // Each parameter as its family declares (ParameterInit), a pure function of the seed and the
  // parameter's name.
  absl::Status Initialize(uint64_t seed);

  // The mixture of experts' loads (expert_load.cc): per block with one on this rank, the tokens
  // each expert received in the microbatches trained since the last call (a forward without a
  // backward, validation's or sampling's, does not count; nor does a recomputation).
  struct ExpertLoad {
    int64_t layer;
    std::vector<int64_t> tokens;
  };
  std::vector<ExpertLoad> TakeExpertLoads();
  // The sequence-wise auxiliary loss (MoeConfig::aux_loss_alpha) of this rank's layers, summed
  // over them and over the microbatches trained since the last call.
  double TakeAuxLoss();
  // TorchTitan's auxiliary-loss-free load balancing, from the loads summed over the ranks that
  // saw other tokens (data and context parallel): each expert's score bias moves by
  // load_balance_coeff x sign(mean load - its load), less the mean of those moves. Does nothing
  // when the model has no bias (load_balance_coeff 0).
  absl::Status BalanceExperts(const std::vector<ExpertLoad>& loads);
  void ZeroGrad();

  // tokens, targets [batch, seq_len]; returns the mean cross-entropy. Plans activation memory
  // when (batch, seq_len) changes.
  absl::StatusOr<float> Forward(const int32_t* tokens, const int32_t* targets, int64_t batch,
                                int64_t seq_len);
  // Accumulates d(loss)/d(parameters) into grads(). Overwrites the logits.
  absl::Status Backward();

  // Checks that the heads, kv heads, hidden features and vocabulary divide among the group's
  // ranks and that each parameter holds this rank's box, then computes tensor-parallel (each
  // parameter split as its declared tp_style says, TorchTitan's Llama plan: column-parallel wq,
  // wk, wv, w1, w3, output and the vocabulary-parallel embedding split dim 0, row-parallel wo
  // and w2 dim 1, the norms replicated). Forward then needs seq_len divisible by the group's
  // size.
  absl::Status SetTensorParallel(const TensorParallelLayout& layout) override;
  // Under async tensor parallelism, what it overlaps and each layer whose communication stays
  // synchronous, with why, one log line each; empty without it.
  std::vector<std::string> DescribeAsyncTensorParallel() const;
  // Async tensor parallelism's communication per layer, hidden and exposed, since the last call,
  // then the sequence-parallel collectives that ran synchronously (all exposed), as the layer
  // "synchronous".
  std::vector<OverlapTime> TakeTensorParallelOverlap();
  absl::Status CheckTensorParallelDegree(int degree) const override;
  // ExpertParallelTarget: the routed experts' weights narrowed to this rank's run of experts.
  absl::Status CheckExpertParallelDegree(int degree) const override;
  absl::Status SetExpertParallel(const ExpertParallelLayout& layout) override;
  int tensor_parallel_degree() const { return ctx_.tp.size(); }

  // Attention (titan/attention.h): the model's own local attention unless a plugin replaced it
  // (the cp plugin's). Forward and SetMicrobatches take whole sequences and keep this rank's
  // tokens of them as the attention's layout says; the loss returned is the whole sequences'.
  absl::Status SetAttention(CausalAttention* attention) override;
  CausalAttention& attention() const { return *ctx_.attention; }
  // The query-key pairs this rank's attention forwards have scored so far (the causal mask's
  // pairs, recomputations included): the measure of its attention work.
  int64_t attention_pairs() const { return ctx_.attention->scored_pairs(); }

  // [batch * seq_len, vocab / tensor-parallel degree] (this rank's vocabulary columns), valid
  // between Forward and Backward; device memory (host memory on the CPU).
  TensorView logits() const;
  size_t activation_bytes() const;

  // Pipeline parallelism (titan/pipeline.h). The step's microbatches, each [batch, seq_len] on
  // the host, kept until the next call; the stage operations then run them.
  absl::Status SetMicrobatches(std::vector<std::vector<int32_t>> tokens,
                               std::vector<std::vector<int32_t>> targets, int64_t batch,
                               int64_t seq_len);
  // The loss of each microbatch, once the last stage's Forward ran it (this rank holds the last
  // stage); NaN before.
  const std::vector<float>& microbatch_losses() const { return microbatch_losses_; }
  const std::vector<PipelineStage>& stages() const { return stages_; }
  int num_stages() const { return num_stages_; }
  bool holds_first_stage() const { return stages_.front().stage == 0; }
  bool holds_last_stage() const { return stages_.back().stage == num_stages_ - 1; }

  int num_microbatches() const override { return static_cast<int>(micro_tokens_.size()); }
  absl::StatusOr<TensorView> StageInput(int stage, int microbatch) override;
  absl::StatusOr<TensorView> StageOutput(int stage, int microbatch) override;
  absl::StatusOr<TensorView> OutputGrad(int stage, int microbatch) override;
  absl::StatusOr<TensorView> InputGrad(int stage, int microbatch) override;
  absl::Status Forward(int stage, int microbatch) override;
  absl::Status Backward(int stage, int microbatch) override;
  absl::Status BackwardInput(int stage, int microbatch) override;
  absl::Status BackwardWeight(int stage, int microbatch) override;

 private:
  // The activations one microbatch keeps from its forward to its backward; the pipeline holds
  // several at once, the plain Forward/Backward use set 0.
  struct MicrobatchActs {
    Arena arena;
    std::vector<BlockActs> blocks;  // per layer; only this model's are set
    // Per layer boundary, [n_local, d]: the residual stream, and its gradient (pp only).
    std::vector<TensorView> residual, d_boundary;
    TensorView final_norm, final_rstd;  // the final norm's output (matmul dtype) and rstd
    OutputActs head;
    TensorView tokens, targets;  // i32 [n]
    int backwards_left = 0;      // local stages yet to finish this microbatch's backward
    // Zero-bubble: what BackwardWeight does, per local stage, in the order BackwardInput left it,
    // and the memory it reads (deferred_plan_), allocated at the set's first BackwardInput.
    std::vector<std::vector<DeferredGrad>> deferred;
    Arena deferred_arena;
  };

  DecoderModel(const LlamaConfig& config, const ActivationCheckpoint& ac, Compute& compute,
               DevicePlugin* device, DType matmul_dtype, const ModelFamily& family)
      : config_(config),
        ac_(ac),
        family_(family),
        local_attention_(compute),
        ctx_(config_, compute, device, matmul_dtype, local_attention_) {}
  // The family's parameters on a rank of `tp` tensor-parallel ranks, those of other pipeline
  // stages left out (their groups empty).
  FamilyParameters OwnedParameters(int64_t tp) const;
  // Builds the modules over the parameters (indices in arena order).
  void BuildModules();
  absl::Status PlanActivations(int64_t batch, int64_t seq_len);
  // deferred_plan_ (and its entries per parameter) for this rank's sizes.
  absl::StatusOr<ArenaPlan> PlanDeferredGrads();
  absl::StatusOr<MicrobatchActs*> NewActivationSet();
  // Computes on `set` from now on: its tokens, targets and activations.
  void Use(MicrobatchActs& set);
  // The set holding microbatch m of the pipeline's step, taken from the free ones at first use.
  absl::StatusOr<MicrobatchActs*> SetFor(int microbatch);
  void ReleaseSet(int microbatch);
  absl::StatusOr<const PipelineStage*> LocalStage(int stage, int microbatch) const;
  // A local stage's input (at its first layer) or output (at its end layer) for a microbatch:
  // the residual stream there, or its gradient.
  absl::StatusOr<TensorView> Boundary(int stage, int microbatch, bool output, bool gradient);
  bool OwnsLayer(int64_t layer) const;
  // The pieces of one stage's forward and backward; `root_hooks` says whether they run the root
  // module's hooks themselves (the plain Forward/Backward wrap everything in them once).
  absl::Status EmbedTokens(bool root_hooks);
  absl::StatusOr<float> HeadForward(bool root_hooks);
  absl::Status HeadBackward(bool root_hooks);
  absl::Status EmbeddingBackward(bool root_hooks);
  absl::Status StageBackward(int stage, int microbatch, bool split);
  absl::Status CheckTokens(const int32_t* tokens, const int32_t* targets) const;
  TensorView d_residual() const {
    return ModuleContext::Reshaped(ctx_.scratch.d_residual, {ctx_.n_local, config_.dim});
  }
  absl::Status ForwardLayers(int64_t first, int64_t end);
  absl::Status BackwardLayers(int64_t first, int64_t end);
  // The weight gradients the zero-bubble split deferred, for `set`'s stage `local_stage`.
  absl::Status RunDeferredGrads(MicrobatchActs& set, int local_stage);

  std::unique_ptr<Compute> profiled_compute_;  // wraps a device's compute; outlives the rest
  LlamaConfig config_;
  ActivationCheckpoint ac_;
  const ModelFamily& family_;
  LocalAttention local_attention_;
  ModuleContext ctx_;  // holds the parameters, the tp group and the attention in use
  ArenaPlan plan_;
  Arena params_, grads_;
  std::vector<ParameterInit> inits_;  // per parameter, in arena order
  ModuleNode root_{""};
  std::vector<std::unique_ptr<ModuleNode>> layer_modules_;
  std::vector<ModuleNode*> layer_module_;  // per layer; null for layers of other stages
  std::vector<PipelineStage> stages_;
  int num_stages_ = 1;
  // Parameter indices; -1 where another stage holds them. A tied output is the embedding.
  int tok_embeddings_ = -1, norm_ = -1, output_ = -1;
  // The modules of this model's stages (null or empty for the others').
  std::unique_ptr<TokenEmbedding> embedding_;
  std::vector<std::unique_ptr<DecoderBlock>> blocks_;  // per layer
  std::unique_ptr<RmsNorm> final_norm_;
  std::unique_ptr<OutputHead> head_;

  // Activations and gradient scratch, sized for (batch_, seq_len_) (ctx_ holds the local sizes).
  int64_t batch_ = 0, seq_len_ = 0;
  Arena shared_arena_;  // scratch every microbatch uses in turn
  ArenaPlan set_plan_;  // one microbatch's activations
  // What one microbatch's split backward keeps for its weight pass, and per parameter the entry
  // of its output gradient and of its recomputed input there (-1: none needed).
  ArenaPlan deferred_plan_;
  std::vector<int> deferred_grad_entry_, deferred_input_entry_;
  // Per layer: each block activation's slot name (in a set, or "recompute.*" shared), in the
  // order DecoderBlock::Activations lists them.
  std::vector<std::vector<std::string>> set_slots_;
  std::vector<std::unique_ptr<MicrobatchActs>> sets_;
  MicrobatchActs* current_ = nullptr;  // the set Use chose
  std::vector<int> set_of_;            // microbatch -> index into sets_, or -1
  std::vector<int> free_sets_;         // indices into sets_
  std::vector<std::vector<int32_t>> micro_tokens_, micro_targets_;
  std::vector<float> microbatch_losses_;
  bool tokens_valid_ = false;              // a Forward's activations await their Backward
  std::unique_ptr<Float8Linears> float8_;  // null: no linear layer in Float8
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_DECODER_MODEL_H_
