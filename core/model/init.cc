// Initialization as the model family declares it for each parameter (ParameterInit). Every value
// is a pure function of (seed, parameter name, element index), so it does not depend on the
// thread count, and a shard can draw its own piece.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "core/model/decoder_model.h"
#include "core/tensor/splitmix64.h"

namespace titan {
namespace {

uint64_t Fnv1a(absl::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char ch : text) hash = (hash ^ static_cast<uint8_t>(ch)) * 0x100000001b3ull;
  return hash;
}

double Uniform(uint64_t key) { return static_cast<double>(SplitMix64(key) >> 11) * 0x1.0p-53; }

// A standard normal for (stream, index, attempt), by Box-Muller.
double Normal(uint64_t stream, int64_t index, int attempt) {
  const uint64_t key = stream ^ SplitMix64(static_cast<uint64_t>(index) * 64 + attempt);
  const double u1 = Uniform(key), u2 = Uniform(key ^ 0x5851f42d4c957f2dull);
  return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(2 * std::numbers::pi * u2);
}

// Normal(0, std) redrawn until inside [low, high], as torch.nn.init.trunc_normal_ samples.
void FillTruncatedNormal(float* x, int64_t n, uint64_t stream, double std, double low,
                         double high) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    double value = 0;
    for (int attempt = 0; attempt < 64; ++attempt) {
      value = std * Normal(stream, i, attempt);
      if (value >= low && value <= high) break;
    }
    x[i] = static_cast<float>(std::fmin(std::fmax(value, low), high));
  }
}

}  // namespace

void DecoderModel::Initialize(uint64_t seed) {
  const uint64_t seed_stream = SplitMix64(seed);
  std::vector<float> host;  // drawn on the host, then copied to the parameter's device
  for (int i = 0; i < params_.size(); ++i) {
    const std::string& name = params_.name(i);
    const int64_t n = params_.at(i).numel();
    host.resize(n);
    const ParameterInit& init = inits_[i];
    if (init.kind == ParameterInit::Kind::kOnes || init.kind == ParameterInit::Kind::kZeros) {
      std::fill(host.begin(), host.end(), init.kind == ParameterInit::Kind::kOnes ? 1.0f : 0.0f);
    } else {
      FillTruncatedNormal(host.data(), n, seed_stream ^ Fnv1a(name), init.std, init.low, init.high);
    }
    // The arena's own memory, sized for it: the copy cannot fail.
    ctx_.compute.CopyFromHost(host.data(), params_.at(i).view()).IgnoreError();
  }
}

}  // namespace titan
