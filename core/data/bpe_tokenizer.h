// Byte-pair encoding over ranked byte strings, as tiktoken does: Llama 3's tokenizer.model
// format (one "base64(bytes) rank" per line), Llama 3's pre-tokenization and its special
// tokens numbered after the ordinary vocabulary.
#ifndef TITAN_CORE_DATA_BPE_TOKENIZER_H_
#define TITAN_CORE_DATA_BPE_TOKENIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/data/pretokenize.h"
#include "core/data/tokenizer.h"

namespace titan {

class BpeTokenizer : public Tokenizer {
 public:
  // `ranks[i]` is the byte string of token i; every single byte must be among them.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Create(std::vector<std::string> ranks,
                                                              absl::string_view source);
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadTiktoken(const std::string& path);

  std::vector<int32_t> Encode(absl::string_view text) const override;
  // Like Encode, but the text of a special token becomes that token.
  std::vector<int32_t> EncodeWithSpecialTokens(absl::string_view text) const;
  std::string Decode(std::span<const int32_t> tokens) const override;
  int32_t vocab_size() const override;
  int32_t bos_id() const override { return special_base(); }
  int32_t eos_id() const override { return special_base() + 1; }
  const std::vector<std::string>& ranks() const { return ranks_; }

 private:
  int32_t special_base() const { return static_cast<int32_t>(ranks_.size()); }
  void EncodePiece(absl::string_view piece, std::vector<int32_t>& out) const;

  std::vector<std::string> ranks_;
  absl::flat_hash_map<std::string, int32_t> rank_of_;
  PreTokenizer pretokenizer_;
};

// Writes ranks in the tiktoken format.
absl::Status WriteTiktoken(const std::vector<std::string>& ranks, const std::string& path);

}  // namespace titan

#endif  // TITAN_CORE_DATA_BPE_TOKENIZER_H_
