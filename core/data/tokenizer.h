// Tokenizers turn bytes into token ids and back. Every byte string round-trips, invalid UTF-8
// included, so no input text is ever lost or rejected.
#ifndef TITAN_CORE_DATA_TOKENIZER_H_
#define TITAN_CORE_DATA_TOKENIZER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Special-token text in `text` stays plain text: corpus bytes never become control tokens.
  virtual std::vector<int32_t> Encode(absl::string_view text) const = 0;
  // Special tokens are written as their text ("<|end_of_text|>").
  virtual std::string Decode(std::span<const int32_t> tokens) const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
};

// Llama 3's special tokens, in id order after the ordinary vocabulary.
const std::vector<std::string>& Llama3SpecialTokens();

// Opens a tokenizer file by its form: "byte" (no file), a tiktoken rank file, or a
// Hugging Face tokenizer.json.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

}  // namespace titan

#endif  // TITAN_CORE_DATA_TOKENIZER_H_
