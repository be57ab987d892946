#include "core/data/bpe_tokenizer.h"

#include <fstream>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace titan {

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(std::vector<std::string> ranks,
                                                                   absl::string_view source) {
  auto tokenizer = std::unique_ptr<BpeTokenizer>(new BpeTokenizer());
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": token ", i, " is empty"));
    }
    if (!tokenizer->rank_of_.emplace(ranks[i], static_cast<int32_t>(i)).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": token ", i, " repeats the bytes of token ", tokenizer->rank_of_[ranks[i]]));
    }
  }
  for (int byte = 0; byte < 256; ++byte) {
    if (!tokenizer->rank_of_.contains(std::string(1, static_cast<char>(byte)))) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": the vocabulary lacks the single byte ", byte,
          "; a byte-level BPE vocabulary needs all 256 so that any text can be encoded"));
    }
  }
  tokenizer->ranks_ = std::move(ranks);
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::LoadTiktoken(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the tokenizer file"));
  std::vector<std::string> ranks;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    std::string bytes;
    int64_t rank = -1;
    if (fields.size() != 2 || !absl::Base64Unescape(fields[0], &bytes) ||
        !absl::SimpleAtoi(fields[1], &rank)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line_no, ": expected \"<base64 bytes> <rank>\" (tiktoken format), found \"",
          line.substr(0, 60), "\""));
    }
    if (rank != static_cast<int64_t>(ranks.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": expected rank ", ranks.size(), ", found ", rank));
    }
    ranks.push_back(std::move(bytes));
  }
  if (ranks.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no tokens"));
  return Create(std::move(ranks), path);
}

absl::Status WriteTiktoken(const std::vector<std::string>& ranks, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  for (size_t i = 0; i < ranks.size(); ++i) out << absl::Base64Escape(ranks[i]) << ' ' << i << '\n';
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot write the tokenizer file"));
  return absl::OkStatus();
}

// tiktoken's algorithm: repeatedly merge the adjacent pair whose joined bytes rank lowest.
void BpeTokenizer::EncodePiece(absl::string_view piece, std::vector<int32_t>& out) const {
  if (auto it = rank_of_.find(piece); it != rank_of_.end()) {
    out.push_back(it->second);
    return;
  }
  std::vector<size_t> starts(piece.size() + 1);  // part i is piece[starts[i], starts[i+1])
  for (size_t i = 0; i <= piece.size(); ++i) starts[i] = i;
  constexpr int32_t kNone = std::numeric_limits<int32_t>::max();
  auto pair_rank = [&](size_t i) {
    if (i + 2 >= starts.size()) return kNone;
    auto it = rank_of_.find(piece.substr(starts[i], starts[i + 2] - starts[i]));
    return it == rank_of_.end() ? kNone : it->second;
  };
  while (starts.size() > 2) {
    int32_t best = kNone;
    size_t best_i = 0;
    for (size_t i = 0; i + 2 < starts.size(); ++i) {
      int32_t rank = pair_rank(i);
      if (rank < best) best = rank, best_i = i;
    }
    if (best == kNone) break;
    starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(best_i) + 1);
  }
  for (size_t i = 0; i + 1 < starts.size(); ++i) {
    out.push_back(rank_of_.at(piece.substr(starts[i], starts[i + 1] - starts[i])));
  }
}

std::vector<int32_t> BpeTokenizer::Encode(absl::string_view text) const {
  std::vector<int32_t> tokens;
  for (absl::string_view piece : pretokenizer_.Split(text)) EncodePiece(piece, tokens);
  return tokens;
}

std::vector<int32_t> BpeTokenizer::EncodeWithSpecialTokens(absl::string_view text) const {
  const auto& specials = Llama3SpecialTokens();
  std::vector<int32_t> tokens;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = text.find("<|", pos);
    int32_t special = -1;
    for (; next != absl::string_view::npos; next = text.find("<|", next + 1)) {
      for (size_t s = 0; s < specials.size() && special < 0; ++s) {
        if (absl::StartsWith(text.substr(next), specials[s])) special = static_cast<int32_t>(s);
      }
      if (special >= 0) break;
    }
    absl::string_view plain = text.substr(pos, next == absl::string_view::npos ? next : next - pos);
    for (absl::string_view piece : pretokenizer_.Split(plain)) EncodePiece(piece, tokens);
    if (special < 0) break;
    tokens.push_back(special_base() + special);
    pos = next + specials[special].size();
  }
  return tokens;
}

std::string BpeTokenizer::Decode(std::span<const int32_t> tokens) const {
  const auto& specials = Llama3SpecialTokens();
  std::string text;
  for (int32_t token : tokens) {
    if (token >= 0 && token < special_base()) {
      text += ranks_[token];
    } else if (token >= special_base() && token < vocab_size()) {
      text += specials[token - special_base()];
    }
  }
  return text;
}

int32_t BpeTokenizer::vocab_size() const {
  return special_base() + static_cast<int32_t>(Llama3SpecialTokens().size());
}

}  // namespace titan
