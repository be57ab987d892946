// The Llama 3 decoder on the CPU: forward and hand-written backward (llm.c style) over
// parameters and gradients that each live in one arena, with activations planned once per
// (batch, seq_len) and reused every step.
#ifndef TITAN_CORE_MODEL_LLAMA_H_
#define TITAN_CORE_MODEL_LLAMA_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/model/activation_checkpoint.h"
#include "core/model/config.h"
#include "core/tensor/arena.h"
#include "core/tensor/attention.h"
#include "titan/module.h"

namespace titan {

class LlamaModel {
 public:
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Create(const LlamaConfig& config,
                                                            const ActivationCheckpoint& ac = {});

  const LlamaConfig& config() const { return config_; }
  // TorchTitan's names ("layers.3.attention.wq.weight"), in one arena each for values and grads.
  const Arena& params() const { return params_; }
  const Arena& grads() const { return grads_; }
  // The same tensors as the SDK's Parameters, for optimizer and parallel plugins.
  std::vector<Parameter> Parameters() const;

  // TorchTitan's initialization, a pure function of the seed and each parameter's name.
  void Initialize(uint64_t seed);
  void ZeroGrad();

  // tokens, targets [batch, seq_len]; returns the mean cross-entropy. Plans activation memory
  // when (batch, seq_len) changes.
  absl::StatusOr<float> Forward(const int32_t* tokens, const int32_t* targets, int64_t batch,
                                int64_t seq_len);
  // Accumulates d(loss)/d(parameters) into grads(). Overwrites the logits.
  absl::Status Backward();
  // [batch * seq_len, vocab], valid between Forward and Backward.
  const float* logits() const { return logits_; }
  size_t activation_bytes() const { return acts_arena_.flat_size() * sizeof(float); }

 private:
  enum Weight { kAttentionNorm, kWq, kWk, kWv, kWo, kFfnNorm, kW1, kW2, kW3, kLayerWeights };
  struct Block {
    std::array<int, kLayerWeights> weights;
    BlockPolicy policy;
  };
  // Activations of one block; pointers into its own slots or the shared recompute scratch.
  struct BlockActs {
    float *ln1, *rstd1, *q, *k, *v, *att, *lse, *x_mid, *ln2, *rstd2, *a, *b, *h;
  };

  LlamaModel(const LlamaConfig& config, const ActivationCheckpoint& ac)
      : config_(config), ac_(ac) {}
  absl::Status PlanActivations(int64_t batch, int64_t seq_len);
  absl::Status CheckTokens(const int32_t* tokens, const int32_t* targets) const;
  float* Param(int index) const { return params_.at(index).data<float>(); }
  float* Grad(int index) const { return grads_.at(index).data<float>(); }
  // The forward pass runs every stage and writes the residual into layer + 1; the recompute
  // before the backward runs only the stages whose outputs the block's policy did not keep.
  void BlockForward(int64_t layer, bool recompute);
  void BlockBackward(int64_t layer);

  LlamaConfig config_;
  ActivationCheckpoint ac_;
  Arena params_, grads_;
  int tok_embeddings_ = -1, norm_ = -1, output_ = -1;
  std::vector<Block> blocks_;

  // Activations and gradient scratch, sized for (batch_, seq_len_).
  int64_t batch_ = 0, seq_len_ = 0;
  Arena acts_arena_;
  AttentionShape attention_shape_{};
  std::vector<float*> residual_;  // n_layers + 1 entries, [N, dim] each
  std::vector<BlockActs> acts_;
  float *rope_cos_, *rope_sin_, *final_norm_, *final_rstd_, *logits_, *loss_lse_;
  float *d_residual_, *d_norm_out_, *d_att_, *d_q_, *d_k_, *d_v_, *d_h_, *d_a_, *d_b_;
  std::vector<int32_t> tokens_, targets_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_LLAMA_H_
