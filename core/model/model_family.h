// A decoder model family: what its token embedding, its n_layers blocks and its head (final
// norm and output) hold, and how a block is built from its parameters. The model
// (core/model/decoder_model.h) composes a family's modules; Llama 3 is one family
// (llama_family.cc).
#ifndef TITAN_CORE_MODEL_MODEL_FAMILY_H_
#define TITAN_CORE_MODEL_MODEL_FAMILY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/model/modules/decoder_block.h"
#include "titan/module.h"

namespace titan {

// How a parameter starts (DecoderModel::Initialize): all ones, all zeros, or each element drawn
// from Normal(0, std) until it lies in [low, high] (torch.nn.init.trunc_normal_).
struct ParameterInit {
  enum class Kind : uint8_t { kOnes, kZeros, kTruncatedNormal } kind = Kind::kOnes;
  double std = 0, low = 0, high = 0;
};

// A parameter as the family declares it: its name, its shape on a rank of the tensor-parallel
// ranks, how tensor parallelism splits it (the tp plugin's plan), whether it is only ever a
// matmul operand (a plugin gathering it may then hand it over in bf16), and how it starts.
// A buffer (the experts' load-balancing bias) is not trained: it never gets a gradient and no
// weight decay, so the optimizer leaves it as it is, and the model moves it itself.
struct ParameterDecl {
  std::string name;
  std::vector<int64_t> shape;
  TensorParallelStyle tp_style;
  bool matmul_weight = false;
  ParameterInit init;
  bool buffer = false;
  bool expert = false;  // a routed experts' weight [experts, ...] (Parameter::expert)
};

// Every parameter of the whole model, grouped by the module that holds it, each group in arena
// order: the embedding table; each block's; the final norm's and (untied) the output's.
struct FamilyParameters {
  std::vector<ParameterDecl> embedding;
  std::vector<std::vector<ParameterDecl>> blocks;
  std::vector<ParameterDecl> head;
};

// All of them in arena order: the embedding's, the blocks', the head's.
std::vector<ParameterDecl> InArenaOrder(FamilyParameters family);

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;
  virtual std::string name() const = 0;
  // The shapes a recipe's model.flavor names; an error lists them.
  virtual std::vector<std::string> flavors() const = 0;
  virtual absl::StatusOr<LlamaConfig> Flavor(absl::string_view flavor) const = 0;
  // On a rank of `tp` tensor-parallel ranks.
  virtual FamilyParameters Declare(const LlamaConfig& config, int64_t tp) const = 0;
  // Block `layer` over its parameters: `weights` indexes the context's parameters, one per
  // declared block parameter, in declaration order.
  virtual std::unique_ptr<DecoderBlock> MakeBlock(ModuleContext& context, int64_t layer,
                                                  const std::vector<int>& weights,
                                                  BlockPolicy policy) const = 0;
};

// Llama 3 (TorchTitan's names and tensor-parallel plan): pre-norm blocks of grouped-query
// attention with RoPE and a SwiGLU feed-forward, RMSNorm, optionally tied embeddings.
const ModelFamily& LlamaFamily();

// Qwen3 (TorchTitan's qwen3): Llama's blocks with an explicit head size, QK-norm and, in the
// MoE flavors, a mixture of experts with softmax top-k routing for every feed-forward.
const ModelFamily& Qwen3Family();

// DeepSeek-V3 (TorchTitan's deepseek_v3): multi-head latent attention with decoupled YaRN RoPE,
// and a mixture of experts with shared experts and node-limited routing after the dense first
// blocks.
const ModelFamily& DeepSeekV3Family();

// Every family, in the order the recipe reference lists them.
std::vector<const ModelFamily*> ModelFamilies();

// The family a recipe's model.name names ("llama3", "qwen3", "deepseek_v3"); an error lists the
// known ones.
absl::StatusOr<const ModelFamily*> ModelFamilyNamed(absl::string_view name);

// The error for a flavor `family` does not have, listing those it has.
absl::Status UnknownFlavor(const ModelFamily& family, absl::string_view flavor);

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODEL_FAMILY_H_
