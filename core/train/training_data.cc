#include "core/train/training_data.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/data/bpe_tokenizer.h"
#include "core/data/bpe_trainer.h"
#include "core/data/documents.h"
#include "core/data/token_shard.h"

namespace titan {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

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
  if (report.skipped > 0) {
    spdlog::warn("[data] skipped {} bad record(s) (data.on_bad_record = \"skip\"); the first: {}",
                 report.skipped, report.first_skip);
  }
  return documents;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(const Recipe& recipe,
                                                         const std::vector<std::string>& docs,
                                                         bool write_files) {
  TITAN_ASSIGN_OR_RETURN(std::string path, recipe.section("model").GetString("tokenizer_path"));
  if (!path.empty()) return LoadTokenizer(path);
  TITAN_ASSIGN_OR_RETURN(int64_t vocab, recipe.section("data").GetInt("bpe_vocab_size"));
  TITAN_ASSIGN_OR_RETURN(std::string dump, recipe.section("job").GetString("dump_folder"));
  auto start = Clock::now();
  BpeTrainer trainer;
  for (const std::string& doc : docs) trainer.AddText(doc);
  TITAN_ASSIGN_OR_RETURN(std::vector<std::string> ranks, trainer.Train(vocab));
  std::string out = (std::filesystem::path(dump) / "tokenizer.tiktoken").string();
  if (write_files) {
    std::filesystem::create_directories(dump);
    TITAN_RETURN_IF_ERROR(WriteTiktoken(ranks, out));
  }
  spdlog::info("[data] learned a BPE vocabulary of {} tokens in {:.1f}s, written to {}",
               ranks.size(), Seconds(start), out);
  TITAN_ASSIGN_OR_RETURN(auto bpe, BpeTokenizer::Create(std::move(ranks), out));
  return std::unique_ptr<Tokenizer>(std::move(bpe));
}

// The packed training stream: pre-tokenized shards (data.format = "tokens", made by
// titan-tokenize with the tokenizer the recipe names), or documents tokenized now.
absl::Status LoadTokens(const Recipe& recipe, bool write_files,
                        std::unique_ptr<Tokenizer>& tokenizer, std::vector<int32_t>& stream) {
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
    int64_t shards = 0;
    TITAN_ASSIGN_OR_RETURN(stream, ReadTokenShards(data, &shards));
    spdlog::info("[data] {}: {} tokens from {} shard(s)", data, stream.size(), shards);
    const int32_t vocab = static_cast<int32_t>(tokenizer->vocab_size());
    for (int32_t token : stream) {
      if (token >= vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat(data, ": token ", token, " is outside the vocabulary of ", vocab, " of ",
                         path, "; were the shards made with another tokenizer?"));
      }
    }
    return absl::OkStatus();
  }
  TITAN_ASSIGN_OR_RETURN(std::vector<std::string> documents, ReadCorpus(recipe));
  TITAN_ASSIGN_OR_RETURN(tokenizer, MakeTokenizer(recipe, documents, write_files));
  for (const std::string& doc : documents) {
    PackDocument(tokenizer->Encode(doc), tokenizer->bos_id(), tokenizer->eos_id(), stream);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainingData> LoadTrainingData(const Recipe& recipe, int64_t local_batch,
                                              int64_t seq_len, int dp_rank, int dp_degree) {
  TITAN_ASSIGN_OR_RETURN(int64_t seed, recipe.section("debug").GetInt("seed"));
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int32_t> stream;
  TITAN_RETURN_IF_ERROR(LoadTokens(recipe, /*write_files=*/dp_rank == 0, tokenizer, stream));
  const ConfigView& validation = recipe.section("validation");
  TITAN_ASSIGN_OR_RETURN(double split, validation.GetFloat("split"));
  TITAN_ASSIGN_OR_RETURN(int64_t eval_freq, validation.GetInt("freq"));
  const int64_t global_batch = local_batch * dp_degree;
  const int64_t windows = static_cast<int64_t>(stream.size()) / (seq_len + 1);
  const int64_t held_out =
      eval_freq > 0 ? std::max<int64_t>(global_batch, std::llround(windows * split)) : 0;
  std::vector<int32_t> held(
      stream.end() - std::min<int64_t>(held_out * (seq_len + 1), stream.size()), stream.end());
  stream.resize(stream.size() - held.size());
  spdlog::info("[data] {} tokens ({} windows of {}), {} held out for validation",
               stream.size() + held.size(), windows, seq_len + 1, held_out);
  TITAN_ASSIGN_OR_RETURN(
      PackedLoader train,
      PackedLoader::Create(std::move(stream), seq_len, local_batch, seed, dp_rank, dp_degree));
  TrainingData data{std::move(tokenizer), std::move(train), std::nullopt};
  if (held_out > 0) {
    TITAN_ASSIGN_OR_RETURN(data.eval, PackedLoader::Create(std::move(held), seq_len, local_batch,
                                                           seed, dp_rank, dp_degree,
                                                           /*shuffle=*/false));
  }
  return data;
}

}  // namespace titan
