// The data side of a training run: the recipe's dataset read (documents tokenized at start-up,
// or pre-tokenized shards mapped in place), its tokenizer loaded or learned, the validation
// windows split off the end, and this data-parallel rank's loaders over the rest.
#ifndef TITAN_CORE_TRAIN_TRAINING_DATA_H_
#define TITAN_CORE_TRAIN_TRAINING_DATA_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "core/data/packed_loader.h"
#include "core/data/tokenizer.h"
#include "core/runtime/recipe.h"

namespace titan {

struct TrainingData {
  std::unique_ptr<Tokenizer> tokenizer;
  PackedLoader train;
  std::optional<PackedLoader> eval;  // empty when validation.freq is 0
};

// Reads or tokenizes the recipe's dataset, learns or loads the tokenizer, splits off the
// validation windows and builds this data-parallel rank's loaders. A learned vocabulary is the
// same on every rank (BpeTrainer is a function of the text); only rank 0 writes it to
// <job.dump_folder>/tokenizer.tiktoken.
absl::StatusOr<TrainingData> LoadTrainingData(const Recipe& recipe, int64_t local_batch,
                                              int64_t seq_len, int dp_rank, int dp_degree);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_TRAINING_DATA_H_
