// The mixture of experts' loads and the balancing of its experts by a bias on their scores.
#include "core/model/decoder_model.h"
#include "core/model/modules/moe_feed_forward.h"

namespace titan {

namespace {

MoeFeedForward* MixtureOf(DecoderBlock* block) {
  return block == nullptr ? nullptr : dynamic_cast<MoeFeedForward*>(&block->feed_forward());
}

}  // namespace

std::vector<DecoderModel::ExpertLoad> DecoderModel::TakeExpertLoads() {
  std::vector<ExpertLoad> loads;
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    MoeFeedForward* moe = MixtureOf(blocks_[l].get());
    if (moe == nullptr) continue;
    loads.push_back({l, moe->load()});
    moe->ResetLoad();
  }
  return loads;
}

double DecoderModel::TakeAuxLoss() {
  double sum = 0;
  for (const std::unique_ptr<DecoderBlock>& block : blocks_) {
    MoeFeedForward* moe = MixtureOf(block.get());
    if (moe == nullptr) continue;
    sum += moe->aux_loss();
    moe->ResetAuxLoss();
  }
  return sum;
}

absl::Status DecoderModel::BalanceExperts(const std::vector<ExpertLoad>& loads) {
  const float coeff = static_cast<float>(config_.moe.load_balance_coeff);
  for (const ExpertLoad& load : loads) {
    MoeFeedForward* moe = MixtureOf(blocks_[load.layer].get());
    if (moe == nullptr || moe->bias() < 0) continue;
    // In f32, as TorchTitan computes it.
    const int64_t experts = static_cast<int64_t>(load.tokens.size());
    float mean_load = 0;
    for (int64_t tokens : load.tokens) mean_load += static_cast<float>(tokens);
    mean_load /= static_cast<float>(experts);
    std::vector<float> delta(experts);
    float mean_delta = 0;
    for (int64_t e = 0; e < experts; ++e) {
      const float gap = mean_load - static_cast<float>(load.tokens[e]);
      delta[e] = coeff * static_cast<float>((gap > 0) - (gap < 0));
      mean_delta += delta[e];
    }
    mean_delta /= static_cast<float>(experts);
    // The bias itself, or this rank's run of it when a plugin keeps it sharded (fsdp): the next
    // gather hands every rank the moved bias.
    const Parameter& p = ctx_.parameters[moe->bias()];
    const bool sharded = p.shard.data != nullptr;
    const TensorView& held = sharded ? p.shard : p.value;
    const int64_t first = sharded ? p.shard_offset : 0;
    if (held.numel() == 0) continue;  // no run of it on this rank
    std::vector<float> bias(held.numel());
    TITAN_RETURN_IF_ERROR(ctx_.compute.CopyToHost(held, bias.data()));
    for (int64_t i = 0; i < held.numel(); ++i) bias[i] += delta[first + i] - mean_delta;
    TITAN_RETURN_IF_ERROR(ctx_.compute.CopyFromHost(bias.data(), held));
  }
  return absl::OkStatus();
}

}  // namespace titan
