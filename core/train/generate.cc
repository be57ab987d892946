#include "core/train/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace titan {

int32_t SampleToken(std::span<const float> logits, const SamplingOptions& options,
                    std::mt19937_64& rng) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (options.temperature <= 0) return ids[0];
  int64_t keep = options.top_k > 0 ? std::min(options.top_k, vocab) : vocab;
  std::vector<double> probs(keep);
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((logits[ids[i]] - logits[ids[0]]) / options.temperature);
    total += probs[i];
  }
  double mass = 0;
  for (int64_t i = 0; i < keep; ++i) {
    mass += probs[i] / total;
    if (mass >= options.top_p) {
      keep = i + 1;
      break;
    }
  }
  std::discrete_distribution<int64_t> pick(probs.begin(), probs.begin() + keep);
  return ids[pick(rng)];
}

absl::Status Generate(DecoderModel& model, std::vector<int32_t>& tokens, int64_t max_new_tokens,
                      int64_t window, int32_t stop, const SamplingOptions& options, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t vocab = model.config().vocab_size;
  // A fixed window keeps the activation plan; causal attention makes the padding invisible.
  std::vector<int32_t> input(window), targets(window, 0);
  std::vector<float> last(vocab);  // the last position's logits, copied to the host
  for (int64_t n = 0; n < max_new_tokens; ++n) {
    const int64_t used = std::min<int64_t>(window, static_cast<int64_t>(tokens.size()));
    std::fill(input.begin(), input.end(), 0);
    std::copy(tokens.end() - used, tokens.end(), input.begin());
    TITAN_RETURN_IF_ERROR(model.Forward(input.data(), targets.data(), 1, window).status());
    // The last used position's row of the logits [window, vocab].
    TensorView row = model.logits();
    row.data = row.data_as<float>() + (used - 1) * vocab;
    row.shape = {vocab};
    TITAN_RETURN_IF_ERROR(model.compute().CopyToHost(row, last.data()));
    tokens.push_back(SampleToken(last, options, rng));
    if (tokens.back() == stop) break;
  }
  return absl::OkStatus();
}

}  // namespace titan
