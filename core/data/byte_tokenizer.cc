#include "core/data/byte_tokenizer.h"

namespace titan {

std::vector<int32_t> ByteTokenizer::Encode(absl::string_view text) const {
  std::vector<int32_t> tokens(text.size());
  for (size_t i = 0; i < text.size(); ++i) tokens[i] = static_cast<unsigned char>(text[i]);
  return tokens;
}

std::string ByteTokenizer::Decode(std::span<const int32_t> tokens) const {
  const auto& specials = Llama3SpecialTokens();
  std::string text;
  for (int32_t token : tokens) {
    if (token >= 0 && token < 256) {
      text.push_back(static_cast<char>(token));
    } else if (token >= 256 && token < vocab_size()) {
      text += specials[token - 256];
    }  // ids outside the vocabulary (a sampler bug) decode to nothing rather than crash
  }
  return text;
}

int32_t ByteTokenizer::vocab_size() const {
  return 256 + static_cast<int32_t>(Llama3SpecialTokens().size());
}

}  // namespace titan
