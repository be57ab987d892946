// Llama 3's pre-tokenization: the regular expression that splits text into the pieces BPE
// merges within (words with their leading space, numbers of up to 3 digits, punctuation runs,
// whitespace). Runs PCRE2 (JIT) in UTF mode tolerating invalid UTF-8, whose bytes become
// pieces of their own so every byte is covered.
#ifndef TITAN_CORE_DATA_PRETOKENIZE_H_
#define TITAN_CORE_DATA_PRETOKENIZE_H_

#include <memory>
#include <vector>

#include "absl/strings/string_view.h"

namespace titan {

class PreTokenizer {
 public:
  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // The pieces, in order; their concatenation is `text`. Thread-safe.
  std::vector<absl::string_view> Split(absl::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The pattern, as in Meta's llama3 tokenizer.py.
extern const char kLlama3Pattern[];

}  // namespace titan

#endif  // TITAN_CORE_DATA_PRETOKENIZE_H_
