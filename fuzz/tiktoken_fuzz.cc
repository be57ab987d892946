// A tiktoken rank file (Llama 3's tokenizer.model). A tokenizer it makes encodes text into ids
// of its vocabulary that decode back to the same text: every byte is a token, so nothing is lost.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/data/bpe_tokenizer.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes = titan::fuzz::Bytes(data, size);
  auto tokenizer =
      titan::BpeTokenizer::LoadTiktoken(titan::fuzz::WriteInput("tokenizer.model", bytes));
  if (!tokenizer.ok()) return 0;
  // The file's own bytes are text with every byte value the fuzzer tried; a prefix keeps it fast.
  const absl::string_view text = bytes.substr(0, 256);
  const std::vector<int32_t> ids = (*tokenizer)->Encode(text);
  for (int32_t id : ids) {
    TITAN_FUZZ_CHECK(id >= 0 && id < (*tokenizer)->vocab_size(), absl::StrCat("id ", id));
  }
  TITAN_FUZZ_CHECK((*tokenizer)->Decode(ids) == text, "Decode(Encode(text)) differs from text");
  return 0;
}
