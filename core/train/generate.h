// Samples text from the live model: temperature, top-k and top-p (nucleus) sampling.
#ifndef TITAN_CORE_TRAIN_GENERATE_H_
#define TITAN_CORE_TRAIN_GENERATE_H_

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "core/model/decoder_model.h"

namespace titan {

struct SamplingOptions {
  double temperature = 0.8;  // 0: always the most likely token
  int64_t top_k = 0;         // 0: all tokens
  double top_p = 1.0;        // keep the smallest set of tokens holding this much probability
};

// Draws a token id from `logits` (vocab entries).
int32_t SampleToken(std::span<const float> logits, const SamplingOptions& options,
                    std::mt19937_64& rng);

// Extends `tokens` by up to `max_new_tokens`, stopping after `stop` (EOS). The model sees the
// last `window` tokens (its training seq_len).
absl::Status Generate(DecoderModel& model, std::vector<int32_t>& tokens, int64_t max_new_tokens,
                      int64_t window, int32_t stop, const SamplingOptions& options, uint64_t seed);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_GENERATE_H_
