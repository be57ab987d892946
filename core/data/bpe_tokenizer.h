// Byte-level byte-pair encoding, one algorithm for both vocabulary forms titan reads. Text is cut
// at added tokens (special tokens and the like, leftmost and longest first), each stretch between
// them is split into pieces by the pre-tokenizers, and each piece starts as its bytes and merges
// the adjacent pair of highest priority, the leftmost on ties, until no pair merges. The forms
// differ only in where the priorities come from:
//  - a tiktoken rank file (Llama 3's tokenizer.model): any two tokens whose joined bytes are a
//    token merge, at that token's rank (lower first);
//  - a Hugging Face tokenizer.json: the pairs of its merges list, in list order.
#ifndef TITAN_CORE_DATA_BPE_TOKENIZER_H_
#define TITAN_CORE_DATA_BPE_TOKENIZER_H_

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/data/pretokenize.h"
#include "core/data/tokenizer.h"

namespace titan {

// A token matched in the text before BPE runs.
struct AddedToken {
  std::string text;
  int32_t id = 0;
  bool special = true;  // Encode leaves its text plain; EncodeWithSpecialTokens matches it
  // Hugging Face matches tokens with normalized = false first, then the others in what is left.
  bool normalized = false;
};

struct BpeDefinition {
  std::vector<std::string> vocab;  // the bytes of each ordinary token, by id
  // How pairs merge: (left id, right id) pairs, highest priority first, each making the token of
  // their joined bytes; or, with merge_by_rank, every pair whose joined bytes are a token, at
  // that token's id.
  std::vector<std::pair<int32_t, int32_t>> merges;
  bool merge_by_rank = false;
  bool ignore_merges = false;  // a piece that is a token is that token, merges or not
  std::vector<AddedToken> added;
  int32_t bos_id = -1, eos_id = -1;
  std::vector<PreTokenizer> pretokenizers;  // applied in order; none: a stretch is one piece
};

class BpeTokenizer : public Tokenizer {
 public:
  // Every single byte must be a token; a malformed definition is an error naming `source`.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(BpeDefinition definition,
                                                              absl::string_view source);
  // tiktoken's form: `ranks[i]` is the bytes of token i, merged by rank, with Llama 3's
  // pre-tokenization and its special tokens numbered after the ranks.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromRanks(std::vector<std::string> ranks,
                                                                 absl::string_view source);
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadTiktoken(const std::string& path);

  // Added tokens that are not special are matched (they are words of the vocabulary); the text
  // of a special token stays plain text (Hugging Face's split_special_tokens).
  std::vector<int32_t> Encode(absl::string_view text) const override;
  // Every added token is matched (Hugging Face's default).
  std::vector<int32_t> EncodeWithSpecialTokens(absl::string_view text) const;
  std::string Decode(std::span<const int32_t> tokens) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  // The bytes of the ordinary tokens, by id.
  const std::vector<std::string>& vocab() const { return vocab_; }

 private:
  struct Merge {
    int32_t priority, id;
  };
  BpeTokenizer() = default;
  void EncodeText(absl::string_view text, bool special, std::vector<int32_t>& out) const;
  void EncodeAddedGroup(absl::string_view text, bool special, bool normalized,
                        std::vector<int32_t>& out) const;
  void EncodeStretch(absl::string_view text, std::vector<int32_t>& out) const;
  void EncodePiece(absl::string_view piece, std::vector<int32_t>& out) const;

  std::vector<std::string> vocab_;
  std::vector<std::string> pieces_;  // what Decode writes for each id
  absl::flat_hash_map<std::string, int32_t> id_of_;
  std::array<int32_t, 256> byte_id_{};
  absl::flat_hash_map<uint64_t, Merge> merges_;
  bool ignore_merges_ = false;
  std::vector<AddedToken> added_;                              // longest first
  std::array<std::vector<int32_t>, 256> added_by_first_byte_;  // indices into added_, in order
  int32_t bos_id_ = -1, eos_id_ = -1;
  std::vector<PreTokenizer> pretokenizers_;
};

// Writes ranks in the tiktoken format.
absl::Status WriteTiktoken(const std::vector<std::string>& ranks, const std::string& path);

}  // namespace titan

#endif  // TITAN_CORE_DATA_BPE_TOKENIZER_H_
