#include "core/data/bpe_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <queue>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/data/input_file.h"

namespace titan {
namespace {

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(BpeDefinition definition,
                                                                   absl::string_view source) {
  auto tokenizer = std::unique_ptr<BpeTokenizer>(new BpeTokenizer());
  BpeTokenizer& t = *tokenizer;
  t.vocab_ = std::move(definition.vocab);
  const auto vocab_size = static_cast<int32_t>(t.vocab_.size());
  for (int32_t i = 0; i < vocab_size; ++i) {
    if (t.vocab_[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": token ", i, " is empty"));
    }
    if (!t.id_of_.emplace(t.vocab_[i], i).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": token ", i, " repeats the bytes of token ", t.id_of_[t.vocab_[i]]));
    }
  }
  for (int byte = 0; byte < 256; ++byte) {
    const auto it = t.id_of_.find(std::string(1, static_cast<char>(byte)));
    if (it == t.id_of_.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": the vocabulary lacks the single byte ", byte,
          "; a byte-level BPE vocabulary needs all 256 so that any text can be encoded"));
    }
    t.byte_id_[byte] = it->second;
  }
  if (definition.merge_by_rank) {
    for (int32_t id = 0; id < vocab_size; ++id) {
      const std::string& bytes = t.vocab_[id];
      for (size_t cut = 1; cut < bytes.size(); ++cut) {
        const auto left = t.id_of_.find(absl::string_view(bytes).substr(0, cut));
        const auto right = t.id_of_.find(absl::string_view(bytes).substr(cut));
        if (left != t.id_of_.end() && right != t.id_of_.end()) {
          t.merges_[PairKey(left->second, right->second)] = {id, id};
        }
      }
    }
  } else {
    for (size_t i = 0; i < definition.merges.size(); ++i) {
      const auto [left, right] = definition.merges[i];
      const auto joined = left >= 0 && left < vocab_size && right >= 0 && right < vocab_size
                              ? t.id_of_.find(t.vocab_[left] + t.vocab_[right])
                              : t.id_of_.end();
      if (joined == t.id_of_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": merge ", i, " (", left, ", ",
                                                       right, ") does not make a token"));
      }
      // A pair listed twice takes its last place, as Hugging Face's merge map does.
      t.merges_[PairKey(left, right)] = {static_cast<int32_t>(i), joined->second};
    }
  }
  t.ignore_merges_ = definition.ignore_merges;

  t.pieces_ = t.vocab_;
  absl::flat_hash_set<int32_t> added_ids;
  for (const AddedToken& token : definition.added) {
    if (token.id < 0 || token.text.empty() || !added_ids.insert(token.id).second ||
        (token.id < vocab_size && t.vocab_[token.id] != token.text)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": added token \"", token.text, "\" (id ", token.id,
                       "): expected a non-empty text, an id of its own, and the same bytes as the "
                       "vocabulary's token of that id if it has one"));
    }
    if (token.id >= static_cast<int32_t>(t.pieces_.size())) t.pieces_.resize(token.id + 1);
    t.pieces_[token.id] = token.text;
  }
  t.added_ = std::move(definition.added);
  std::stable_sort(t.added_.begin(), t.added_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.text.size() > b.text.size();
  });
  for (size_t i = 0; i < t.added_.size(); ++i) {
    t.added_by_first_byte_[static_cast<unsigned char>(t.added_[i].text[0])].push_back(
        static_cast<int32_t>(i));
  }
  if (definition.bos_id < 0 || definition.bos_id >= t.vocab_size() || definition.eos_id < 0 ||
      definition.eos_id >= t.vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": BOS ", definition.bos_id, " and EOS ",
                                                   definition.eos_id, " must be ids below ",
                                                   t.vocab_size()));
  }
  t.bos_id_ = definition.bos_id;
  t.eos_id_ = definition.eos_id;
  t.pretokenizers_ = std::move(definition.pretokenizers);
  return tokenizer;
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromRanks(
    std::vector<std::string> ranks, absl::string_view source) {
  BpeDefinition definition;
  const auto count = static_cast<int32_t>(ranks.size());
  definition.vocab = std::move(ranks);
  definition.merge_by_rank = true;
  definition.ignore_merges = true;  // tiktoken looks a whole piece up first
  const std::vector<std::string>& specials = Llama3SpecialTokens();
  for (size_t i = 0; i < specials.size(); ++i) {
    definition.added.push_back({specials[i], count + static_cast<int32_t>(i)});
  }
  definition.bos_id = count;
  definition.eos_id = count + 1;
  definition.pretokenizers.emplace_back();
  return Create(std::move(definition), source);
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::LoadTiktoken(const std::string& path) {
  TITAN_RETURN_IF_ERROR(InspectInput(path, /*folder_ok=*/false, "a tiktoken rank file").status());
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
          // Escaped: a binary file's bytes must not reach the log raw.
          absl::CHexEscape(absl::string_view(line).substr(0, 60)),
          line.size() > 60 ? "...\"" : "\""));
    }
    if (rank != static_cast<int64_t>(ranks.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": expected rank ", ranks.size(), ", found ", rank));
    }
    ranks.push_back(std::move(bytes));
  }
  if (ranks.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no tokens"));
  return FromRanks(std::move(ranks), path);
}

absl::Status WriteTiktoken(const std::vector<std::string>& ranks, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  for (size_t i = 0; i < ranks.size(); ++i) out << absl::Base64Escape(ranks[i]) << ' ' << i << '\n';
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot write the tokenizer file"));
  return absl::OkStatus();
}

// The pairs wait in a queue ordered by (priority, position); a merge makes at most two new
// pairs, and a queued pair whose symbols have changed since is skipped. This is Hugging Face's
// algorithm, and tiktoken's result.
void BpeTokenizer::EncodePiece(absl::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (auto it = id_of_.find(piece); it != id_of_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id, prev, next;  // prev and next: positions, -1 at the ends
  };
  struct Candidate {
    int32_t priority, position, left, right, merged;
    bool operator>(const Candidate& o) const {
      return priority != o.priority ? priority > o.priority : position > o.position;
    }
  };
  const auto n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_id_[static_cast<unsigned char>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int32_t position) {
    const int32_t next = symbols[position].next;
    if (next < 0) return;
    const int32_t left = symbols[position].id, right = symbols[next].id;
    if (auto it = merges_.find(PairKey(left, right)); it != merges_.end()) {
      queue.push({it->second.priority, position, left, right, it->second.id});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& symbol = symbols[c.position];
    if (symbol.id != c.left || symbol.next < 0 || symbols[symbol.next].id != c.right) continue;
    Symbol& gone = symbols[symbol.next];
    symbol.id = c.merged;
    symbol.next = gone.next;
    if (gone.next >= 0) symbols[gone.next].prev = c.position;
    gone.id = -1;
    if (symbol.prev >= 0) consider(symbol.prev);
    consider(c.position);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

void BpeTokenizer::EncodeStretch(absl::string_view text, std::vector<int32_t>& out) const {
  std::vector<absl::string_view> pieces = {text};
  for (const PreTokenizer& pretokenizer : pretokenizers_) {
    std::vector<absl::string_view> split;
    for (absl::string_view piece : pieces) {
      for (absl::string_view part : pretokenizer.Split(piece)) split.push_back(part);
    }
    pieces = std::move(split);
  }
  for (absl::string_view piece : pieces) EncodePiece(piece, out);
}

// Leftmost-longest matching of the group's added tokens; between matches the text goes on to
// the next group, then to BPE. A special token's text met while special tokens are off stays
// plain text and matching goes on after it, as in Hugging Face's split_special_tokens.
void BpeTokenizer::EncodeAddedGroup(absl::string_view text, bool special, bool normalized,
                                    std::vector<int32_t>& out) const {
  auto plain = [&](absl::string_view stretch) {
    if (stretch.empty()) return;
    if (normalized) {
      EncodeStretch(stretch, out);
    } else {
      EncodeAddedGroup(stretch, special, /*normalized=*/true, out);
    }
  };
  size_t start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* token = nullptr;
    for (int32_t i : added_by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      if (added_[i].normalized == normalized &&
          absl::StartsWith(text.substr(pos), added_[i].text)) {
        token = &added_[i];
        break;
      }
    }
    if (token == nullptr) {
      ++pos;
      continue;
    }
    if (token->special && !special) {
      pos += token->text.size();
      continue;
    }
    plain(text.substr(start, pos - start));
    out.push_back(token->id);
    pos += token->text.size();
    start = pos;
  }
  plain(text.substr(start));
}

void BpeTokenizer::EncodeText(absl::string_view text, bool special,
                              std::vector<int32_t>& out) const {
  if (added_.empty()) {
    EncodeStretch(text, out);
  } else {
    EncodeAddedGroup(text, special, /*normalized=*/false, out);
  }
}

std::vector<int32_t> BpeTokenizer::Encode(absl::string_view text) const {
  std::vector<int32_t> tokens;
  EncodeText(text, /*special=*/false, tokens);
  return tokens;
}

std::vector<int32_t> BpeTokenizer::EncodeWithSpecialTokens(absl::string_view text) const {
  std::vector<int32_t> tokens;
  EncodeText(text, /*special=*/true, tokens);
  return tokens;
}

std::string BpeTokenizer::Decode(std::span<const int32_t> tokens) const {
  std::string text;
  for (int32_t token : tokens) {
    if (token >= 0 && token < vocab_size()) text += pieces_[token];
  }
  return text;
}

}  // namespace titan
