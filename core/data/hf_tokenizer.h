// Hugging Face tokenizer.json files with a byte-level BPE model (Llama 3's and GPT-2's form):
// the vocabulary's byte-level strings become the ranked byte strings of a BpeTokenizer.
// Merge priority is taken as id order, which holds for these files and is checked: a merge
// whose result does not rank after its parts is an error. Added tokens must be Llama 3's special
// tokens numbered after the vocabulary, as titan numbers them.
#ifndef TITAN_CORE_DATA_HF_TOKENIZER_H_
#define TITAN_CORE_DATA_HF_TOKENIZER_H_

#include <memory>
#include <string>

#include "core/data/bpe_tokenizer.h"

namespace titan {

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadHuggingFaceTokenizer(const std::string& path);

// GPT-2's byte-to-character map that byte-level vocabularies are written in, and its inverse
// (error for a character outside it).
std::string ByteLevelEncode(absl::string_view bytes);
absl::StatusOr<std::string> ByteLevelDecode(absl::string_view text);

}  // namespace titan

#endif  // TITAN_CORE_DATA_HF_TOKENIZER_H_
