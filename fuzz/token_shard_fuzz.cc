// A pre-tokenized shard (.tok): a shard that opens holds exactly the tokens its header
// announces, and every way of reading them agrees.
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/data/token_shard.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<titan::TokenShard> shard =
      titan::TokenShard::Open(titan::fuzz::WriteInput("shard.tok", titan::fuzz::Bytes(data, size)));
  if (!shard.ok()) return 0;
  const titan::TokenSpan& tokens = shard->tokens();
  TITAN_FUZZ_CHECK(24 + tokens.size() * tokens.width() == static_cast<int64_t>(size),
                   absl::StrCat(tokens.size(), " tokens of ", tokens.width(), " bytes"));
  std::vector<int32_t> all(static_cast<size_t>(tokens.size()));
  tokens.Read(0, tokens.size(), all.data());
  int64_t first_outside = -1;
  const int32_t limit = 1000;
  for (int64_t i = 0; i < tokens.size(); ++i) {
    TITAN_FUZZ_CHECK(all[static_cast<size_t>(i)] == tokens[i], absl::StrCat("token ", i));
    if (first_outside < 0 && (tokens[i] < 0 || tokens[i] >= limit)) first_outside = i;
  }
  TITAN_FUZZ_CHECK(tokens.FindOutside(limit) == first_outside, absl::StrCat(first_outside));
  return 0;
}
