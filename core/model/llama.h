// The Llama 3 decoder: forward and hand-written backward (llm.c style) over parameters and
// gradients that each live in one arena, with activations planned once per (batch, seq_len) and
// reused every step. Every kernel runs through the device's compute interface (titan/compute.h),
// in f32 or with bf16 matmul operands (mixed precision).
#ifndef TITAN_CORE_MODEL_LLAMA_H_
#define TITAN_CORE_MODEL_LLAMA_H_

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
#include "core/model/module_node.h"
#include "core/model/tensor_parallel.h"
#include "core/tensor/arena.h"
#include "core/tensor/attention.h"
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

class LlamaModel : public TensorParallelTarget, public PipelineStageTarget, public AttentionHost {
 public:
  // With a pipeline plan, the model holds only the plan's local stages: their blocks, the
  // embedding on stage 0 and the final norm and output on the last stage, under their global
  // names. An empty plan: one stage with everything.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(const LlamaConfig& config,
                                                            const ActivationCheckpoint& ac = {},
                                                            const ModelCompute& where = {},
                                                            const PipelinePlan& stages = {});

  const LlamaConfig& config() const { return config_; }
  // Every parameter's name and shape in the whole (one-stage, one-rank) model, in arena order.
  static std::vector<std::pair<std::string, std::vector<int64_t>>> WholeParameterShapes(
      const LlamaConfig& config) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
    for (ParameterDecl& decl : DeclaredParameters(config, 1)) {
      shapes.emplace_back(std::move(decl.name), std::move(decl.shape));
    }
    return shapes;
  }
  Compute& compute() const { return *compute_; }
  // The device plugin holding the model's memory; null: host memory (the CPU).
  DevicePlugin* device() const { return device_; }
  DType matmul_dtype() const { return matmul_dtype_; }
  // TorchTitan's names ("layers.3.attention.wq.weight"), in one arena each for values and grads.
  // Empty once parallel plugins keep the parameters elsewhere (see ReleaseUnusedStorage).
  const Arena& params() const { return params_; }
  const Arena& grads() const { return grads_; }
  // The same tensors as the SDK's Parameters, in arena order; the model computes with whatever
  // their value and grad point at, so plugins can move them.
  const std::vector<Parameter>& Parameters() const { return parameters_; }
  // The module tree parallel plugins transform: the root holds tok_embeddings, norm and output,
  // its children are the blocks "layers.N".
  Module& root() { return root_; }
  // Frees the parameter and gradient arenas when no parameter points into them any more.
  void ReleaseUnusedStorage();
  // Writes every parameter's current value to `path` in the arena file format.
  absl::Status SaveParameters(const std::string& path) const;

  // The float8 converter (core/model/float8_linear.h): the linear layers `plugin` converts, and
  // whose shapes allow it, run their GEMMs in Float8 from now on. Returns every linear layer's
  // outcome, for the log. With `gather_float8` (fsdp's float8 all-gather, tensorwise recipes
  // only) their weights ask to be handed over quantized (Parameter::compute_dtype e4m3).
  absl::StatusOr<std::vector<Float8LinearChoice>> ConvertToFloat8(const Float8Plugin& plugin,
                                                                  bool gather_float8 = false);

  // TorchTitan's initialization, a pure function of the seed and each parameter's name.
  void Initialize(uint64_t seed);
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
  absl::Status CheckTensorParallelDegree(int degree) const override;
  int tensor_parallel_degree() const { return tp_.size(); }

  // Attention (titan/attention.h): the model's own local attention unless a plugin replaced it
  // (the cp plugin's). Forward and SetMicrobatches take whole sequences and keep this rank's
  // tokens of them as the attention's layout says; the loss returned is the whole sequences'.
  absl::Status SetAttention(CausalAttention* attention) override;
  CausalAttention& attention() const { return *attention_; }
  // The query-key pairs this rank's attention forwards have scored so far (the causal mask's
  // pairs, recomputations included): the measure of its attention work.
  int64_t attention_pairs() const { return attention_->scored_pairs(); }

  // [batch * seq_len, vocab / tensor-parallel degree] (this rank's vocabulary columns), valid
  // between Forward and Backward; device memory (host memory on the CPU).
  const float* logits() const { return logits_; }
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
  enum Weight { kAttentionNorm, kWq, kWk, kWv, kWo, kFfnNorm, kW1, kW2, kW3, kLayerWeights };
  struct Block {
    std::array<int, kLayerWeights> weights;
    BlockPolicy policy;
  };
  // Activations of one block; pointers into its own slots or the shared recompute scratch. The
  // ones only matmuls read (ln1, ln2 and SwiGLU's output h) are stored in the matmul dtype, so
  // under mixed precision they are bf16, rounded once where they are made.
  struct BlockActs {
    float *rstd1, *q, *k, *v, *att, *lse, *x_mid, *rstd2, *a, *b;
    TensorView ln1, ln2, h;
  };
  // Where a microbatch set points a block's activation: an f32 field or a matmul input, and the
  // slot's name (in the set, or "recompute.*" shared by every layer).
  struct ActSlot {
    float* BlockActs::*f32;        // null for a matmul input
    TensorView BlockActs::*input;  // null for an f32 activation
    std::string name;
  };

  // The sizes one tensor-parallel rank computes with: all of them on one rank.
  struct LocalSizes {
    int64_t heads, kv_heads, hidden, vocab, first_vocab;
  };

  // The bf16 scratch a matmul operand is rounded into: the input (the attention's output; the
  // other inputs are stored in bf16), the output's gradient, the weight.
  enum Scratch { kInputScratch, kGradScratch, kWeightScratch, kScratches };

  // A weight gradient the zero-bubble split leaves for BackwardWeight: grad(weight) += dout^T .
  // in (a projection), or the norm weight's gradient summed already (`in` null).
  struct DeferredGrad {
    enum Kind { kProjection, kNorm, kEmbedding } kind;
    int layer;  // whose module's hooks surround it; -1: the root's
    int weight;
    int64_t rows;
    // The output's gradient (a projection, the embedding) or the norm's sum, and a projection's
    // input; each in the microbatch's activation set (the forward's, or a copy in its `deferred`
    // arena when it sat in scratch the next layer overwrites).
    TensorView saved, in;
  };

  // The activations one microbatch keeps from its forward to its backward; the pipeline holds
  // several at once, the plain Forward/Backward use set 0.
  struct MicrobatchActs {
    Arena arena;
    std::vector<BlockActs> blocks;             // per layer; only this model's are set
    std::vector<float*> residual, d_boundary;  // per layer boundary; d_boundary with pp only
    TensorView final_norm;                     // in the matmul dtype, as the blocks' matmul inputs
    float *final_rstd = nullptr, *logits = nullptr;
    float *loss_lse = nullptr, *loss_max = nullptr, *loss_target = nullptr, *loss = nullptr;
    int32_t *tokens = nullptr, *targets = nullptr;
    int backwards_left = 0;  // local stages yet to finish this microbatch's backward
    // Zero-bubble: what BackwardWeight does, per local stage, in the order BackwardInput left it,
    // and the memory it reads (deferred_plan_), allocated at the set's first BackwardInput.
    std::vector<std::vector<DeferredGrad>> deferred;
    Arena deferred_arena;
  };

  LlamaModel(const LlamaConfig& config, const ActivationCheckpoint& ac, Compute& compute,
             DevicePlugin* device, DType matmul_dtype)
      : config_(config),
        ac_(ac),
        compute_(&compute),
        device_(device),
        matmul_dtype_(matmul_dtype),
        local_attention_(compute) {}
  // A parameter as the model declares it where it creates it: its name, its shape on a rank of
  // the tensor-parallel ranks, and how tensor parallelism splits it (the tp plugin's plan).
  struct ParameterDecl {
    std::string name;
    std::vector<int64_t> shape;
    TensorParallelStyle tp_style;
  };
  // Every parameter of the whole model on a rank of `tp` tensor-parallel ranks, in arena order.
  static std::vector<ParameterDecl> DeclaredParameters(const LlamaConfig& config, int64_t tp);
  // Those of this model's stages, in arena order.
  std::vector<ParameterDecl> OwnedParameters(int64_t tp) const;
  LocalSizes local() const;
  // out[n_local, d] (this rank's tokens) += the row-parallel projection in . weight^T (`in` an
  // Operand), summed over the tensor-parallel ranks.
  absl::Status AddRowParallel(float* out, const TensorView& in, int weight);
  AttentionSpec attention_spec() const;
  // RMSNorm of this rank's tokens of `inp`, gathered into out [n, d] (f32 or bf16) for the
  // column-parallel projections that follow.
  absl::Status NormAndGather(const TensorView& out, float* rstd, const float* inp, int weight);
  // The norm's backward on this rank's tokens; d_out_full [n, d] holds this rank's partial sums
  // for every token. The weight's gradient adds up over the tensor-parallel ranks.
  absl::Status NormBackward(float* d_residual, float* d_out_full, const float* inp,
                            const float* rstd, int weight);
  absl::Status PlanActivations(int64_t batch, int64_t seq_len);
  // deferred_plan_ (and its entries per parameter) for n tokens of this rank's local sizes.
  absl::StatusOr<ArenaPlan> PlanDeferredGrads(int64_t n, int64_t qd, int64_t kvd, int64_t f);
  // Attention of block activations x through attention_, on flat views of this rank's tokens.
  absl::Status Attend(const BlockActs& x);
  absl::Status AttendBackward(const BlockActs& x);
  absl::StatusOr<MicrobatchActs*> NewActivationSet();
  // Points the activation members (acts_, residual_, logits_, ...) at `set`'s.
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
  float* Param(int index) const { return parameters_[index].value.data_as<float>(); }
  float* Grad(int index) const { return parameters_[index].grad.data_as<float>(); }
  // An f32 view of model memory on the compute's device.
  TensorView View(const float* data, std::vector<int64_t> shape) const;
  TensorView Tokens(const int32_t* data) const;
  // A matmul operand in the compute precision: x itself when it has that dtype, else (f32 under
  // mixed precision) its bf16 rounding in `scratch`.
  absl::StatusOr<TensorView> Operand(const TensorView& x, Scratch scratch);
  bool Float8(int weight) const { return float8_ != nullptr && float8_->Converts(weight); }
  // A weight as a matmul operand: the low-precision copy a plugin gathered (Parameter::compute),
  // else its value as an Operand.
  absl::StatusOr<TensorView> WeightOperand(int weight);
  absl::StatusOr<Float8Operand> Float8WeightOperand(int weight);
  // How tensor and context parallelism split a Float8 linear's operands now.
  Float8Split Float8SplitOf(int weight) const;
  // out[n, oc] (+)= in . weight^T; `in` is an Operand.
  absl::Status Project(const TensorView& in, int weight, float* out, bool accumulate = false);
  // The backward of Project over in's rows: dinp[rows, c] += dout . weight (skipped when null)
  // and weight's grad += dout^T . in (deferred under the zero-bubble split); f32 dout, `in` as
  // the forward stored it (f32 or bf16).
  absl::Status ProjectBackward(const float* dout, const TensorView& in, int weight, float* dinp);
  // Where the zero-bubble split keeps `values` (a weight's output gradient, or with `input` its
  // input) for BackwardWeight: `values` itself when it lies in the microbatch's activation set,
  // else its copy in the set's deferred arena (zeros there when `values` has no data).
  absl::StatusOr<TensorView> KeepForWeightPass(const TensorView& values, int weight, bool input);
  absl::Status Zero(float* x, int64_t n) const;
  absl::Status CopyF32(const float* src, float* dst, int64_t n) const;
  // The forward pass runs every stage and writes the residual into layer + 1; the recompute
  // before the backward runs only the stages whose outputs the block's policy did not keep.
  absl::Status BlockForward(int64_t layer, bool recompute);
  absl::Status BlockBackward(int64_t layer);
  absl::Status ForwardLayers(int64_t first, int64_t end);
  absl::Status BackwardLayers(int64_t first, int64_t end);
  // The layers' weight gradients the zero-bubble split deferred, for `set`'s stage `stage`.
  absl::Status RunDeferredGrads(MicrobatchActs& set, int local_stage);

  LlamaConfig config_;
  ActivationCheckpoint ac_;
  Compute* compute_;
  DevicePlugin* device_;  // allocates the arenas; null: host memory
  DType matmul_dtype_;
  ArenaPlan plan_;
  Arena params_, grads_;
  std::vector<Parameter> parameters_;
  ModuleNode root_{""};
  std::vector<std::unique_ptr<ModuleNode>> layer_modules_;
  std::vector<ModuleNode*> layer_module_;  // per layer; null for layers of other stages
  std::vector<PipelineStage> stages_;
  int num_stages_ = 1;
  int tok_embeddings_ = -1, norm_ = -1, output_ = -1;
  std::vector<Block> blocks_;
  TensorParallelGroup tp_;
  LocalAttention local_attention_;
  CausalAttention* attention_ = &local_attention_;  // a plugin's, or local_attention_

  // Activations and gradient scratch, sized for (batch_, seq_len_).
  int64_t batch_ = 0, seq_len_ = 0, n_local_ = 0;  // n_local_: this rank's tokens
  Arena shared_arena_;                             // scratch every microbatch uses in turn
  ArenaPlan set_plan_;                             // one microbatch's activations
  // What one microbatch's split backward keeps for its weight pass, and per parameter the entry
  // of its output gradient and of its recomputed input there (-1: none needed).
  ArenaPlan deferred_plan_;
  std::vector<int> deferred_grad_entry_, deferred_input_entry_;
  // Per layer: each activation's field and its slot (in a set, or "recompute.*" shared).
  std::vector<std::vector<ActSlot>> set_slots_;
  std::vector<std::unique_ptr<MicrobatchActs>> sets_;
  std::vector<int> set_of_;     // microbatch -> index into sets_, or -1
  std::vector<int> free_sets_;  // indices into sets_
  std::vector<std::vector<int32_t>> micro_tokens_, micro_targets_;
  std::vector<float> microbatch_losses_;
  // Set while a zero-bubble BackwardInput runs: weight gradients go here instead of the grads.
  MicrobatchActs* deferring_ = nullptr;
  int deferring_stage_ = 0;  // index into stages_
  int deferring_layer_ = -1;
  AttentionShape attention_shape_{};
  std::vector<float*> residual_;  // n_layers + 1 entries, [n_local_, dim] each
  std::vector<BlockActs> acts_;
  TensorView final_norm_;
  float *rope_cos_, *rope_sin_, *final_rstd_, *logits_, *loss_lse_;
  float *loss_max_, *loss_target_, *loss_;
  int32_t *tokens_device_, *targets_device_;
  std::array<uint16_t*, kScratches> bf16_scratch_{};  // null in f32
  // Tensor-parallel scratch (null on one rank): this rank's tokens, every token, a norm's grad.
  float *tokens_local_ = nullptr, *tokens_full_ = nullptr, *norm_grad_ = nullptr;
  // Gradient scratch. In bf16 the forward borrows d_norm_out_ and d_h_ for the f32 results of
  // the norms and SwiGLU before their rounding: the backward uses them only after its recompute.
  float *d_residual_, *d_norm_out_, *d_att_, *d_q_, *d_k_, *d_v_, *d_h_, *d_a_, *d_b_;
  bool tokens_valid_ = false;              // a Forward's activations await their Backward
  std::unique_ptr<Float8Linears> float8_;  // null: no linear layer in Float8
  std::vector<bool> row_parallel_;         // per parameter: tp splits its in_features (kRowwise)
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_LLAMA_H_
