#include "core/data/bpe_trainer.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/data/pretokenize.h"

namespace titan {
namespace {

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b);
}

struct Word {
  std::vector<int32_t> symbols;
  int64_t count;
};

}  // namespace

void BpeTrainer::AddText(absl::string_view text) {
  static const PreTokenizer pretokenizer;
  for (absl::string_view piece : pretokenizer.Split(text)) ++piece_counts_[piece];
}

absl::StatusOr<std::vector<std::string>> BpeTrainer::Train(int64_t vocab_size) const {
  if (vocab_size < 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("a BPE vocabulary needs at least the 256 bytes, asked for ", vocab_size));
  }
  std::vector<std::string> vocab;  // by symbol id
  for (int byte = 0; byte < 256; ++byte) vocab.emplace_back(1, static_cast<char>(byte));
  std::vector<std::string> ranks = vocab;
  absl::flat_hash_map<std::string, int32_t> id_of;
  for (int32_t i = 0; i < 256; ++i) id_of[vocab[i]] = i;

  // Sorted so that word order (and so the whole run) does not depend on hashing.
  std::vector<std::pair<std::string, int64_t>> pieces(piece_counts_.begin(), piece_counts_.end());
  std::sort(pieces.begin(), pieces.end());
  std::vector<Word> words;
  for (const auto& [piece, count] : pieces) {
    Word word{{}, count};
    for (char c : piece) word.symbols.push_back(static_cast<unsigned char>(c));
    words.push_back(std::move(word));
  }
  absl::flat_hash_map<uint64_t, int64_t> pair_counts;
  absl::flat_hash_map<uint64_t, absl::flat_hash_set<int32_t>> pair_words;
  auto count_word = [&](int32_t w, int64_t sign) {
    const Word& word = words[w];
    for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
      uint64_t key = PairKey(word.symbols[i], word.symbols[i + 1]);
      pair_counts[key] += sign * word.count;
      if (sign > 0) pair_words[key].insert(w);
    }
  };
  for (int32_t w = 0; w < static_cast<int32_t>(words.size()); ++w) count_word(w, 1);

  while (static_cast<int64_t>(ranks.size()) < vocab_size) {
    uint64_t best = 0;
    int64_t best_count = 1;  // a pair seen once teaches nothing
    for (const auto& [key, count] : pair_counts) {
      if (count > best_count || (count == best_count && best_count > 1 && key < best)) {
        best = key, best_count = count;
      }
    }
    if (best_count <= 1) break;
    const int32_t a = static_cast<int32_t>(best >> 32), b = static_cast<int32_t>(best & 0xffffffff);
    std::string merged = vocab[a] + vocab[b];
    int32_t id;
    if (auto it = id_of.find(merged); it != id_of.end()) {
      id = it->second;  // the same bytes from another pair: one token, no new rank
    } else {
      id = static_cast<int32_t>(vocab.size());
      vocab.push_back(merged);
      ranks.push_back(merged);
      id_of[merged] = id;
    }
    absl::flat_hash_set<int32_t> affected = std::move(pair_words[best]);
    pair_words.erase(best);
    for (int32_t w : affected) {
      count_word(w, -1);
      std::vector<int32_t>& s = words[w].symbols;
      std::vector<int32_t> out;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          out.push_back(id);
          ++i;
        } else {
          out.push_back(s[i]);
        }
      }
      s = std::move(out);
      count_word(w, 1);
    }
    pair_counts.erase(best);
    absl::erase_if(pair_counts, [](const auto& entry) { return entry.second <= 0; });
  }
  return ranks;
}

}  // namespace titan
