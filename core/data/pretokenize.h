// Pre-tokenization: a regular expression splits text into the pieces BPE merges within (for
// Llama 3: words with their leading space, numbers of up to 3 digits, punctuation runs,
// whitespace), as a Hugging Face `Split` pre-tokenizer does. Runs PCRE2 (JIT) in UTF mode
// tolerating invalid UTF-8: a run of text the pattern skips is a piece of its own, except that
// each byte of invalid UTF-8 in it is a piece by itself, so every byte is covered. A pattern's
// \p{L}-style classes and \s take the code points tiktoken and tokenizers give them, not PCRE2's
// own (unicode_classes.h).
#ifndef TITAN_CORE_DATA_PRETOKENIZE_H_
#define TITAN_CORE_DATA_PRETOKENIZE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan {

// What becomes of the text a pattern matches (Hugging Face's SplitDelimiterBehavior).
enum class SplitBehavior {
  kIsolated,  // a piece of its own
  kRemoved,   // dropped: it is not encoded, and decoding does not bring it back
};

class PreTokenizer {
 public:
  // Llama 3's pattern, matches isolated.
  PreTokenizer();
  // `pattern` is a regular expression, or with `literal` a plain string. One that does not
  // compile, or could match the empty string, is an error quoting it.
  static absl::StatusOr<PreTokenizer> Create(absl::string_view pattern, bool literal,
                                             SplitBehavior behavior);
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // The pieces, in order; with kIsolated their concatenation is `text`. Thread-safe.
  std::vector<absl::string_view> Split(absl::string_view text) const;

 private:
  struct Impl;
  explicit PreTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `pattern` with \p{X} (X a property unicode_classes.h lists) and \s as tiktoken and tokenizers
// take them: PCRE2's classes plus the code points Unicode added since PCRE2's tables (14 in
// Debian 12), and white space without U+180E; \S outside a bracket likewise. Escapes, \Q...\E
// quotes and brackets' own syntax pass through; \P{X}, and \S in a bracket, keep PCRE2's.
std::string WithReferenceClasses(absl::string_view pattern);

// The pattern, as in Meta's llama3 tokenizer.py.
extern const char kLlama3Pattern[];
// GPT-2's, which a Hugging Face ByteLevel pre-tokenizer with use_regex applies.
extern const char kGpt2Pattern[];

}  // namespace titan

#endif  // TITAN_CORE_DATA_PRETOKENIZE_H_
