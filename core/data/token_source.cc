#include "core/data/token_source.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/data/input_file.h"

namespace titan {

absl::StatusOr<std::shared_ptr<const TokenSource>> TokenSource::Open(const std::string& path) {
  TITAN_ASSIGN_OR_RETURN(InputKind kind,
                         InspectInput(path, /*folder_ok=*/true,
                                      absl::StrCat("a token shard (*", kTokenShardExtension,
                                                   ") or a folder of them")));
  std::error_code error;
  std::vector<std::string> files;
  if (kind == InputKind::kFolder) {
    for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
      if (entry.is_regular_file() && entry.path().extension() == kTokenShardExtension) {
        files.push_back(entry.path().string());
      }
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      return absl::NotFoundError(absl::StrCat("\"", path, "\": a folder without token shards (*",
                                              kTokenShardExtension, ")"));
    }
  } else {
    files.push_back(path);
  }
  auto source = std::shared_ptr<TokenSource>(new TokenSource());
  for (const std::string& file : files) {
    TITAN_ASSIGN_OR_RETURN(TokenShard shard, TokenShard::Open(file));
    source->mapped_.push_back(std::move(shard));
    source->names_.push_back(file);
  }
  // Moving a TokenShard keeps its mapping where it is, so the spans stay valid.
  for (const TokenShard& shard : source->mapped_) source->spans_.push_back(shard.tokens());
  return source;
}

std::shared_ptr<const TokenSource> TokenSource::FromTokens(
    std::vector<std::vector<int32_t>> shards) {
  auto source = std::shared_ptr<TokenSource>(new TokenSource());
  source->owned_ = std::move(shards);
  for (size_t i = 0; i < source->owned_.size(); ++i) {
    source->spans_.emplace_back(source->owned_[i]);
    source->names_.push_back(absl::StrCat("in-memory shard ", i));
  }
  return source;
}

int64_t TokenSource::num_tokens() const {
  int64_t total = 0;
  for (const TokenSpan& span : spans_) total += span.size();
  return total;
}

absl::Status TokenSource::CheckVocabulary(int64_t vocab_size, absl::string_view tokenizer) const {
  for (int64_t i = 0; i < num_shards(); ++i) {
    const TokenSpan& span = spans_[i];
    if (span.width() == 2 && vocab_size >= 65536) continue;  // every uint16 fits
    const int64_t at = span.FindOutside(vocab_size);
    if (at < 0) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(names_[i], ": token ", static_cast<uint32_t>(span[at]), " at position ", at,
                     " is outside the vocabulary of ", vocab_size, " of ", tokenizer,
                     "; were the shards made with another tokenizer?"));
  }
  return absl::OkStatus();
}

}  // namespace titan
