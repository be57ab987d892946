// A JSON Lines corpus file, read as titan reads training data: strictly, with bad records
// skipped, and zstd-compressed. The three readings agree on the documents.
#include <zstd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/data/documents.h"
#include "fuzz/fuzz_support.h"

namespace {

struct Reading {
  absl::Status status;
  std::vector<std::string> documents;
  titan::DocumentReport report;
};

Reading Read(const std::string& path, bool skip_bad_records) {
  Reading r;
  titan::DocumentOptions options;
  options.skip_bad_records = skip_bad_records;
  r.status = titan::ReadDocuments(
      path, options, [&](absl::string_view doc) { r.documents.emplace_back(doc); }, &r.report);
  for (const std::string& doc : r.documents) TITAN_FUZZ_CHECK(!doc.empty(), path);
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes = titan::fuzz::Bytes(data, size);
  const std::string path = titan::fuzz::WriteInput("corpus.jsonl", bytes);
  const Reading strict = Read(path, false);
  const Reading skipping = Read(path, true);
  if (strict.status.ok()) {
    TITAN_FUZZ_CHECK(skipping.status.ok() && skipping.documents == strict.documents &&
                         skipping.report.skipped == 0,
                     "a file read strictly reads alike with bad records skipped");
  }
  TITAN_FUZZ_CHECK(skipping.status.ok() == !skipping.documents.empty(),
                   std::string(skipping.status.message()));

  std::string compressed(ZSTD_compressBound(bytes.size()), '\0');
  const size_t length =
      ZSTD_compress(compressed.data(), compressed.size(), bytes.data(), bytes.size(), 1);
  TITAN_FUZZ_CHECK(!ZSTD_isError(length), ZSTD_getErrorName(length));
  compressed.resize(length);
  const Reading zst = Read(titan::fuzz::WriteInput("corpus.jsonl.zst", compressed), false);
  TITAN_FUZZ_CHECK(
      zst.status.ok() == strict.status.ok() && zst.documents == strict.documents,
      absl::StrCat("compressed: ", zst.status.message(), "; plain: ", strict.status.message()));
  return 0;
}
