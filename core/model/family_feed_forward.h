// What the qwen3 and deepseek_v3 families share: a block's feed-forward, dense or a mixture of
// experts (TorchTitan's names and initialization), declared and built the same way.
#ifndef TITAN_CORE_MODEL_FAMILY_FEED_FORWARD_H_
#define TITAN_CORE_MODEL_FAMILY_FEED_FORWARD_H_

#include <memory>
#include <vector>

#include "core/model/model_family.h"
#include "core/model/modules/feed_forward.h"

namespace titan {

// Normal(0, std) cut to [low, high] (torch.nn.init.trunc_normal_).
ParameterInit TruncatedNormal(double std, double low, double high);

// Block `layer`'s feed-forward parameters after its ffn_norm, appended to `weights`, as one of
// `tp` tensor-parallel ranks holds them: the dense SwiGLU, or the mixture of experts (router,
// bias, experts, shared experts). `in` starts w1 and the experts' w1, `out` the rest.
void DeclareFeedForward(const LlamaConfig& c, int64_t layer, int64_t tp, const ParameterInit& in,
                        const ParameterInit& out, std::vector<ParameterDecl>& weights);

// The feed-forward over those parameters, w[next] onwards (next moves past them).
std::unique_ptr<FeedForwardLayer> MakeFeedForward(ModuleContext& context, int64_t layer,
                                                  const std::vector<int>& w, size_t& next);

}  // namespace titan

#endif  // TITAN_CORE_MODEL_FAMILY_FEED_FORWARD_H_
