// Tokenizes a corpus into pre-tokenized shards (core/data/token_shard.h): documents are read
// in blocks, each block encoded by several threads, then packed in corpus order with BOS/EOS
// around each document and cut into shards of about shard_tokens tokens (never mid-document), so
// the output does not depend on the thread count.
#ifndef TITAN_TOOLS_TOKENIZE_SHARD_WRITER_H_
#define TITAN_TOOLS_TOKENIZE_SHARD_WRITER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "core/data/documents.h"
#include "core/data/tokenizer.h"

namespace titan {

struct ShardOptions {
  std::string output;              // folder for shard_00000.tok, shard_00001.tok, ...
  int threads = 1;                 // encoding threads
  int64_t shard_tokens = 1 << 26;  // a shard is closed once it holds this many tokens
  int64_t block_documents = 1024;  // documents encoded together between progress reports
};

struct ShardReport {
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t shards = 0;
  int64_t bytes_read = 0;  // text bytes of the documents
  DocumentReport input;    // what reading the corpus found, once it is read
};

// Called after each block with the totals so far.
using ShardProgress = std::function<void(const ShardReport&)>;

absl::StatusOr<ShardReport> WriteShards(const std::string& input, const DocumentOptions& documents,
                                        const Tokenizer& tokenizer, const ShardOptions& options,
                                        const ShardProgress& progress);

}  // namespace titan

#endif  // TITAN_TOOLS_TOKENIZE_SHARD_WRITER_H_
