#include "core/train/training_data.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/data/bpe_tokenizer.h"
#include "core/data/bpe_trainer.h"
#include "core/data/documents.h"
#include "core/data/token_source.h"

namespace titan {
namespace {

using Clock = std::chrono::steady_clock;

// Every document of the dataset, read once: the BPE trainer and the packer both need them.
absl::StatusOr<std::vector<std::string>> ReadCorpus(const TrainingDataOptions& options) {
  const std::string& path = options.dataset_path;
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "training.dataset_path is empty: name a text, .jsonl or .jsonl.zst file or folder");
  }
  std::vector<std::string> documents;
  DocumentReport report;
  TITAN_RETURN_IF_ERROR(ReadDocuments(
      path, options.documents, [&](absl::string_view d) { documents.emplace_back(d); }, &report));
  spdlog::info("[data] {}: {} documents from {} file(s)", path, report.documents, report.files);
  for (const std::string& warning : DocumentWarnings(report)) spdlog::warn("[data] {}", warning);
  return documents;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(const TrainingDataOptions& options,
                                                         const std::vector<std::string>& docs,
                                                         bool write_vocabulary) {
  if (!options.tokenizer_path.empty()) return LoadTokenizer(options.tokenizer_path);
  const std::string& dump = options.dump_folder;
  auto start = Clock::now();
  BpeTrainer trainer;
  for (const std::string& doc : docs) trainer.AddText(doc);
  TITAN_ASSIGN_OR_RETURN(std::vector<std::string> ranks, trainer.Train(options.bpe_vocab_size));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::string out = (std::filesystem::path(dump) / "tokenizer.tiktoken").string();
  if (write_vocabulary) {
    std::filesystem::create_directories(dump);
    TITAN_RETURN_IF_ERROR(WriteTiktoken(ranks, out));
    spdlog::info("[data] learned a BPE vocabulary of {} tokens in {:.1f}s, written to {}",
                 ranks.size(), seconds, out);
  } else {
    spdlog::info("[data] learned a BPE vocabulary of {} tokens in {:.1f}s", ranks.size(), seconds);
  }
  TITAN_ASSIGN_OR_RETURN(auto bpe, BpeTokenizer::FromRanks(std::move(ranks), out));
  return std::unique_ptr<Tokenizer>(std::move(bpe));
}

// The tokens to train on: pre-tokenized shards mapped in place (data.format = "tokens", made by
// titan-tokenize with the tokenizer the recipe names), or documents tokenized now into one
// in-memory shard.
absl::StatusOr<std::shared_ptr<const TokenSource>> LoadTokens(
    const TrainingDataOptions& options, int dp_rank, std::unique_ptr<Tokenizer>& tokenizer) {
  if (options.pretokenized) {
    // The job plan refuses pre-tokenized data without a tokenizer.
    const std::string& path = options.tokenizer_path;
    TITAN_ASSIGN_OR_RETURN(tokenizer, LoadTokenizer(path));
    const std::string& data = options.dataset_path;
    TITAN_ASSIGN_OR_RETURN(std::shared_ptr<const TokenSource> source, TokenSource::Open(data));
    spdlog::info("[data] {}: {} tokens from {} shard(s)", data, source->num_tokens(),
                 source->num_shards());
    TITAN_RETURN_IF_ERROR(source->CheckVocabulary(tokenizer->vocab_size(), path));
    return source;
  }
  TITAN_ASSIGN_OR_RETURN(std::vector<std::string> documents, ReadCorpus(options));
  TITAN_ASSIGN_OR_RETURN(
      tokenizer, MakeTokenizer(options, documents, dp_rank == 0 && options.write_vocabulary));
  std::vector<std::vector<int32_t>> stream(1);
  for (const std::string& doc : documents) {
    PackDocument(tokenizer->Encode(doc), tokenizer->bos_id(), tokenizer->eos_id(), stream[0]);
  }
  return TokenSource::FromTokens(std::move(stream));
}

}  // namespace

absl::StatusOr<TrainingData> LoadTrainingData(const TrainingDataOptions& options, int dp_rank,
                                              int dp_degree) {
  std::unique_ptr<Tokenizer> tokenizer;
  TITAN_ASSIGN_OR_RETURN(std::shared_ptr<const TokenSource> source,
                         LoadTokens(options, dp_rank, tokenizer));
  const int64_t local_batch = options.local_batch_size, seq_len = options.seq_len;
  const int64_t windows = CountWindows(*source, seq_len);
  // The tail of the data, at least one global batch of it, so every rank evaluates.
  const int64_t held_out =
      options.validation
          ? std::min(windows, std::max<int64_t>(local_batch * dp_degree,
                                                std::llround(windows * options.validation_split)))
          : 0;
  spdlog::info("[data] {} tokens ({} windows of {}), {} held out for validation",
               source->num_tokens(), windows, seq_len + 1, held_out);
  LoaderOptions loader;
  loader.seq_len = seq_len;
  loader.batch = local_batch;
  loader.seed = options.seed;
  loader.dp_rank = dp_rank;
  loader.dp_degree = dp_degree;
  loader.end_window = windows - held_out;
  TITAN_ASSIGN_OR_RETURN(PackedLoader train, PackedLoader::Create(source, loader));
  std::optional<PackedLoader> eval;
  if (held_out > 0) {
    loader.first_window = windows - held_out;
    loader.end_window = windows;
    loader.shuffle = false;
    TITAN_ASSIGN_OR_RETURN(eval, PackedLoader::Create(std::move(source), loader));
  }
  return TrainingData{std::move(tokenizer), std::move(train), std::move(eval)};
}

}  // namespace titan
