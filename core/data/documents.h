// Reads the documents of a corpus in the forms public pre-training corpora ship in: plain text
// files, JSON Lines and zstd-compressed JSON Lines (streamed), a single file or a folder.
#ifndef TITAN_CORE_DATA_DOCUMENTS_H_
#define TITAN_CORE_DATA_DOCUMENTS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan {

struct DocumentOptions {
  std::string text_field = "text";  // the JSON Lines field holding a document's text
  // A line of plain text that separates documents ("%" in fortune files); empty: one file is
  // one document.
  std::string text_separator;
  bool skip_bad_records = false;                    // false: a malformed record is an error
  std::string path_name = "training.dataset_path";  // how errors name the path: a key or a flag
};

struct DocumentReport {
  int64_t files = 0;
  int64_t documents = 0;
  int64_t skipped = 0;
  std::string first_skip;  // where and why the first skipped record was skipped
  // Files read as text (by their name) whose bytes look binary: a NUL in the first 8 KiB, as git
  // judges. They are still read; the caller warns.
  int64_t binary_files = 0;
  std::string first_binary;
};

// What a reader of `report` is warned of, a sentence each: skipped records, binary-looking files.
std::vector<std::string> DocumentWarnings(const DocumentReport& report);

// Calls `sink` with each non-empty document of `path` (a file, or a folder read recursively in
// name order: *.jsonl and *.jsonl.zst as JSON Lines, *.txt and files without an extension as
// text, others ignored). Missing or empty data is an error naming the path.
absl::Status ReadDocuments(const std::string& path, const DocumentOptions& options,
                           const std::function<void(absl::string_view)>& sink,
                           DocumentReport* report);

}  // namespace titan

#endif  // TITAN_CORE_DATA_DOCUMENTS_H_
