// Initialization as the model family declares it for each parameter (ParameterInit), drawn by
// the compute where the parameter lives (FillTruncatedNormal: titan/truncated_normal.h). Every
// value is a pure function of (seed, parameter name, element index), so it does not depend on the
// thread count or the device, and a shard can draw its own piece.
#include "core/model/decoder_model.h"
#include "titan/splitmix64.h"

namespace titan {
namespace {

uint64_t Fnv1a(absl::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char ch : text) hash = (hash ^ static_cast<uint8_t>(ch)) * 0x100000001b3ull;
  return hash;
}

}  // namespace

absl::Status DecoderModel::Initialize(uint64_t seed) {
  const uint64_t seed_stream = SplitMix64(seed);
  for (int i = 0; i < params_.size(); ++i) {
    const ParameterInit& init = inits_[i];
    const TensorView x = params_.at(i).view();
    if (init.kind == ParameterInit::Kind::kOnes || init.kind == ParameterInit::Kind::kZeros) {
      TITAN_RETURN_IF_ERROR(
          ctx_.compute.Fill(x, init.kind == ParameterInit::Kind::kOnes ? 1.0f : 0.0f));
    } else {
      TITAN_RETURN_IF_ERROR(ctx_.compute.FillTruncatedNormal(
          x, seed_stream ^ Fnv1a(params_.name(i)), init.std, init.low, init.high));
    }
  }
  return absl::OkStatus();
}

}  // namespace titan
