// Hugging Face tokenizer.json files whose model is byte-level BPE (GPT-2's, Llama 3's and their
// kin), encoded as the `tokenizers` library encodes them:
//  - model: "BPE"; ids from `vocab`, merge priority from the order of `merges` ("a b" strings or
//    [a, b] pairs), `ignore_merges` honoured;
//  - added_tokens: matched before BPE with their own ids, leftmost and longest first. Encode
//    leaves the text of special ones plain (split_special_tokens); EncodeWithSpecialTokens
//    matches them too;
//  - pre_tokenizer: a ByteLevel (use_regex: GPT-2's pattern, else none), or a Sequence of Splits
//    (a Regex or String pattern; behavior Isolated or Removed) ending in one ByteLevel, as Llama 3
//    ships. Patterns run on PCRE2, which reads the Oniguruma syntax these files use.
//  - BOS and EOS: the first added token found among <|begin_of_text|>, <s>, <bos>,
//    <|startoftext|>, <|endoftext|> and among <|end_of_text|>, </s>, <eos>, <|endoftext|>. A file
//    without one gets titan's <|begin_of_text|> or <|end_of_text|> as a new special token after
//    its highest id.
// post_processor and decoder are not used: titan places BOS/EOS itself when packing, and
// decoding writes each token's bytes. Anything that would encode otherwise - another model
// (WordPiece, Unigram), byte_fallback, dropout, subword prefixes or suffixes, a normalizer,
// another pre-tokenizer, add_prefix_space, invert, lstrip/rstrip/single_word added tokens - is
// refused with an error naming the file and the field.
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
