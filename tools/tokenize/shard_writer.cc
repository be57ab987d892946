#include "tools/tokenize/shard_writer.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/data/packed_loader.h"
#include "core/data/token_shard.h"

namespace titan {
namespace {

std::string ShardPath(const std::string& output, int64_t index) {
  return (std::filesystem::path(output) /
          absl::StrFormat("shard_%05d%s", index, kTokenShardExtension))
      .string();
}

class Sharder {
 public:
  Sharder(const Tokenizer& tokenizer, const ShardOptions& options)
      : tokenizer_(tokenizer), options_(options) {}

  // Encodes the block on the worker threads, then packs it in document order.
  absl::Status AddBlock(std::vector<std::string>& block) {
    std::vector<std::vector<int32_t>> encoded(block.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i = next++; i < block.size(); i = next++)
        encoded[i] = tokenizer_.Encode(block[i]);
    };
    std::vector<std::thread> workers;
    const int helpers = std::max(1, options_.threads) - 1;
    for (int t = 0; t < helpers; ++t) workers.emplace_back(work);
    work();
    for (std::thread& worker : workers) worker.join();
    for (size_t i = 0; i < block.size(); ++i) {
      const size_t before = current_.size();
      PackDocument(encoded[i], tokenizer_.bos_id(), tokenizer_.eos_id(), current_);
      report_.tokens += static_cast<int64_t>(current_.size() - before);
      report_.bytes_read += static_cast<int64_t>(block[i].size());
      ++report_.documents;
      if (static_cast<int64_t>(current_.size()) >= options_.shard_tokens) {
        TITAN_RETURN_IF_ERROR(Flush());
      }
    }
    block.clear();
    return absl::OkStatus();
  }

  absl::Status Flush() {
    if (current_.empty()) return absl::OkStatus();
    TITAN_RETURN_IF_ERROR(WriteTokenShard(ShardPath(options_.output, report_.shards), current_));
    ++report_.shards;
    current_.clear();
    return absl::OkStatus();
  }

  const ShardReport& report() const { return report_; }

 private:
  const Tokenizer& tokenizer_;
  const ShardOptions& options_;
  std::vector<int32_t> current_;
  ShardReport report_;
};

// Reads the corpus and writes its shards through `sharder`.
absl::Status Tokenize(const std::string& input, const DocumentOptions& documents,
                      const ShardOptions& options, const ShardProgress& progress, Sharder& sharder,
                      DocumentReport& read_report) {
  std::vector<std::string> block;
  absl::Status failed;
  TITAN_RETURN_IF_ERROR(ReadDocuments(
      input, documents,
      [&](absl::string_view document) {
        if (!failed.ok()) return;
        block.emplace_back(document);
        if (static_cast<int64_t>(block.size()) < options.block_documents) return;
        failed = sharder.AddBlock(block);
        if (failed.ok() && progress) progress(sharder.report());
      },
      &read_report));
  TITAN_RETURN_IF_ERROR(failed);
  TITAN_RETURN_IF_ERROR(sharder.AddBlock(block));
  return sharder.Flush();
}

}  // namespace

absl::StatusOr<ShardReport> WriteShards(const std::string& input, const DocumentOptions& documents,
                                        const Tokenizer& tokenizer, const ShardOptions& options,
                                        const ShardProgress& progress) {
  namespace fs = std::filesystem;
  std::error_code error;
  const bool existed = fs::exists(options.output, error);
  fs::create_directories(options.output, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("--output=", options.output, ": cannot create the folder: ", error.message()));
  }
  Sharder sharder(tokenizer, options);
  DocumentReport read_report;
  const absl::Status written = Tokenize(input, documents, options, progress, sharder, read_report);
  if (!written.ok()) {
    // A failure leaves nothing behind: no folder it made, no part of a corpus to train on.
    if (!existed) {
      fs::remove_all(options.output, error);
    } else {
      const int64_t shards = sharder.report().shards;
      for (int64_t i = 0; i < shards; ++i) fs::remove(ShardPath(options.output, i), error);
      fs::remove(ShardPath(options.output, shards) + ".tmp", error);
    }
    return written;
  }
  if (progress) progress(sharder.report());
  ShardReport report = sharder.report();
  report.input = read_report;
  return report;
}

}  // namespace titan
