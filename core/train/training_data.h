// The data side of a training run: the recipe's dataset read (documents tokenized at start-up,
// or pre-tokenized shards mapped in place), its tokenizer loaded or learned, the validation
// windows split off the end, and this data-parallel rank's loaders over the rest.
#ifndef TITAN_CORE_TRAIN_TRAINING_DATA_H_
#define TITAN_CORE_TRAIN_TRAINING_DATA_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "core/data/documents.h"
#include "core/data/packed_loader.h"
#include "core/data/tokenizer.h"

namespace titan {

// Where the data comes from and how it is cut ([training], [data], [validation], [model]).
struct TrainingDataOptions {
  std::string dataset_path;      // training.dataset_path
  std::string tokenizer_path;    // model.tokenizer_path; empty: learn a BPE vocabulary
  bool pretokenized = false;     // data.format = "tokens": shards made by titan-tokenize
  DocumentOptions documents;     // how text files are read (data.text_field, ...)
  int64_t bpe_vocab_size = 0;    // ordinary tokens of a learned vocabulary
  std::string dump_folder;       // where rank 0 writes a learned vocabulary
  bool write_vocabulary = true;  // false: --validate, which leaves the dump folder as it is
  double validation_split = 0;   // fraction of the windows held out
  bool validation = false;       // validation.freq > 0: hold out windows and build their loader
  int64_t local_batch_size = 0;
  int64_t seq_len = 0;
  uint64_t seed = 0;  // the training loader's shuffle
};

struct TrainingData {
  std::unique_ptr<Tokenizer> tokenizer;
  PackedLoader train;
  std::optional<PackedLoader> eval;  // empty when validation.freq is 0
};

// Reads or tokenizes the recipe's dataset, learns or loads the tokenizer, splits off the
// validation windows and builds this data-parallel rank's loaders. A learned vocabulary is the
// same on every rank (BpeTrainer is a function of the text); only rank 0 writes it to
// <job.dump_folder>/tokenizer.tiktoken.
absl::StatusOr<TrainingData> LoadTrainingData(const TrainingDataOptions& options, int dp_rank,
                                              int dp_degree);

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_TRAINING_DATA_H_
