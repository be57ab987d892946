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
absl::StatusOr<std::vector<std::string>> ReadCorpus(const Recipe& recipe) {
  const ConfigView& training = recipe.section("training");
  const ConfigView& data = recipe.section("data");
  DocumentOptions options;
  TITAN_ASSIGN_OR_RETURN(options.text_field, data.GetString("text_field"));
  TITAN_ASSIGN_OR_RETURN(options.text_separator, data.GetString("text_separator"));
  TITAN_ASSIGN_OR_RETURN(std::string on_bad, data.GetString("on_bad_record"));
  options.skip_bad_records = on_bad == "skip";
  TITAN_ASSIGN_OR_RETURN(std::string path, training.GetString("dataset_path"));
  if (path.empty()) {
    return absl::InvalidArgumentError(
        "training.dataset_path is empty: name a text, .jsonl or .jsonl.zst file or folder");
  }
  std::vector<std::string> documents;
  DocumentReport report;
  TITAN_RETURN_IF_ERROR(ReadDocuments(
      path, options, [&](absl::string_view d) { documents.emplace_back(d); }, &report));
  spdlog::info("[data] {}: {} documents from {} file(s)", path, report.documents, report.files);
  for (const std::string& warning : DocumentWarnings(report)) spdlog::warn("[data] {}", warning);
  return documents;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(const Recipe& recipe,
                                                         const std::vector<std::string>& docs,
                                                         bool write_vocabulary) {
  TITAN_ASSIGN_OR_RETURN(std::string path, recipe.section("model").GetString("tokenizer_path"));
  if (!path.empty()) return LoadTokenizer(path);
  TITAN_ASSIGN_OR_RETURN(int64_t vocab, recipe.section("data").GetInt("bpe_vocab_size"));
  TITAN_ASSIGN_OR_RETURN(std::string dump, recipe.section("job").GetString("dump_folder"));
  auto start = Clock::now();
  BpeTrainer trainer;
  for (const std::string& doc : docs) trainer.AddText(doc);
  TITAN_ASSIGN_OR_RETURN(std::vector<std::string> ranks, trainer.Train(vocab));
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
    const Recipe& recipe, int dp_rank, std::unique_ptr<Tokenizer>& tokenizer) {
  TITAN_ASSIGN_OR_RETURN(std::string format, recipe.section("data").GetString("format"));
  if (format == "tokens") {
    TITAN_ASSIGN_OR_RETURN(std::string path, recipe.section("model").GetString("tokenizer_path"));
    if (path.empty()) {
      return recipe.section("model").Error(
          "tokenizer_path",
          "data.format = \"tokens\" needs the tokenizer the shards were made "
          "with (model.tokenizer_path)");
    }
    TITAN_ASSIGN_OR_RETURN(tokenizer, LoadTokenizer(path));
    TITAN_ASSIGN_OR_RETURN(std::string data, recipe.section("training").GetString("dataset_path"));
    TITAN_ASSIGN_OR_RETURN(std::shared_ptr<const TokenSource> source, TokenSource::Open(data));
    spdlog::info("[data] {}: {} tokens from {} shard(s)", data, source->num_tokens(),
                 source->num_shards());
    TITAN_RETURN_IF_ERROR(source->CheckVocabulary(tokenizer->vocab_size(), path));
    return source;
  }
  TITAN_ASSIGN_OR_RETURN(std::vector<std::string> documents, ReadCorpus(recipe));
  TITAN_ASSIGN_OR_RETURN(tokenizer, MakeTokenizer(recipe, documents, dp_rank == 0));
  std::vector<std::vector<int32_t>> stream(1);
  for (const std::string& doc : documents) {
    PackDocument(tokenizer->Encode(doc), tokenizer->bos_id(), tokenizer->eos_id(), stream[0]);
  }
  return TokenSource::FromTokens(std::move(stream));
}

}  // namespace

absl::StatusOr<TrainingData> LoadTrainingData(const Recipe& recipe, int64_t local_batch,
                                              int64_t seq_len, int dp_rank, int dp_degree) {
  std::unique_ptr<Tokenizer> tokenizer;
  TITAN_ASSIGN_OR_RETURN(std::shared_ptr<const TokenSource> source,
                         LoadTokens(recipe, dp_rank, tokenizer));
  const ConfigView& validation = recipe.section("validation");
  TITAN_ASSIGN_OR_RETURN(double split, validation.GetFloat("split"));
  TITAN_ASSIGN_OR_RETURN(int64_t eval_freq, validation.GetInt("freq"));
  TITAN_ASSIGN_OR_RETURN(int64_t seed, recipe.section("debug").GetInt("seed"));
  const int64_t windows = CountWindows(*source, seq_len);
  // The tail of the data, at least one global batch of it, so every rank evaluates.
  const int64_t held_out = eval_freq > 0
                               ? std::min(windows, std::max<int64_t>(local_batch * dp_degree,
                                                                     std::llround(windows * split)))
                               : 0;
  spdlog::info("[data] {} tokens ({} windows of {}), {} held out for validation",
               source->num_tokens(), windows, seq_len + 1, held_out);
  LoaderOptions options;
  options.seq_len = seq_len;
  options.batch = local_batch;
  options.seed = static_cast<uint64_t>(seed);
  options.dp_rank = dp_rank;
  options.dp_degree = dp_degree;
  options.end_window = windows - held_out;
  TITAN_ASSIGN_OR_RETURN(PackedLoader train, PackedLoader::Create(source, options));
  std::optional<PackedLoader> eval;
  if (held_out > 0) {
    options.first_window = windows - held_out;
    options.end_window = windows;
    options.shuffle = false;
    TITAN_ASSIGN_OR_RETURN(eval, PackedLoader::Create(std::move(source), options));
  }
  return TrainingData{std::move(tokenizer), std::move(train), std::move(eval)};
}

}  // namespace titan
