// One token per byte (0-255), then Llama 3's special tokens: needs no vocabulary file.
#ifndef TITAN_CORE_DATA_BYTE_TOKENIZER_H_
#define TITAN_CORE_DATA_BYTE_TOKENIZER_H_

#include "core/data/tokenizer.h"

namespace titan {

class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> Encode(absl::string_view text) const override;
  std::string Decode(std::span<const int32_t> tokens) const override;
  int32_t vocab_size() const override;
  int32_t bos_id() const override { return 256; }
  int32_t eos_id() const override { return 257; }
};

}  // namespace titan

#endif  // TITAN_CORE_DATA_BYTE_TOKENIZER_H_
