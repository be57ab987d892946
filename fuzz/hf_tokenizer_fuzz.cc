// A Hugging Face tokenizer.json. A tokenizer it makes encodes text (with and without its
// special tokens) into ids of its vocabulary, and decodes them.
#include "absl/strings/str_cat.h"
#include "core/data/hf_tokenizer.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes = titan::fuzz::Bytes(data, size);
  auto tokenizer =
      titan::LoadHuggingFaceTokenizer(titan::fuzz::WriteInput("tokenizer.json", bytes));
  if (!tokenizer.ok()) return 0;
  const titan::BpeTokenizer& t = **tokenizer;
  TITAN_FUZZ_CHECK(t.bos_id() >= 0 && t.bos_id() < t.vocab_size(), absl::StrCat(t.bos_id()));
  TITAN_FUZZ_CHECK(t.eos_id() >= 0 && t.eos_id() < t.vocab_size(), absl::StrCat(t.eos_id()));
  const absl::string_view text = bytes.substr(0, 256);
  for (const std::vector<int32_t>& ids : {t.Encode(text), t.EncodeWithSpecialTokens(text)}) {
    for (int32_t id : ids) {
      TITAN_FUZZ_CHECK(id >= 0 && id < t.vocab_size(), absl::StrCat("id ", id));
    }
    t.Decode(ids);
  }
  return 0;
}
