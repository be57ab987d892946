#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/data/pretokenize.h"

#include <pcre2.h>

#include <stdexcept>
#include <string>

namespace titan {

const char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct PreTokenizer::Impl {
  pcre2_code* code = nullptr;
};

PreTokenizer::PreTokenizer() : impl_(std::make_unique<Impl>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kLlama3Pattern), PCRE2_ZERO_TERMINATED,
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  // The pattern is a constant: failing to compile it is a bug in this file, not bad input.
  if (impl_->code == nullptr) throw std::logic_error("the Llama 3 pattern does not compile");
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
}

PreTokenizer::~PreTokenizer() { pcre2_code_free(impl_->code); }

std::vector<absl::string_view> PreTokenizer::Split(absl::string_view text) const {
  std::vector<absl::string_view> pieces;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(impl_->code, subject, text.size(), pos, 0, match, nullptr);
    size_t start = text.size(), end = text.size();
    if (rc > 0) {
      PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
      start = ovector[0];
      end = ovector[1];
    }
    // Bytes the pattern skipped are invalid UTF-8: one piece per byte.
    for (; pos < start; ++pos) pieces.push_back(text.substr(pos, 1));
    if (end > start) pieces.push_back(text.substr(start, end - start));
    if (end == start && start < text.size()) {
      // An empty match cannot happen with this pattern; step on to stay safe.
      pieces.push_back(text.substr(start, 1));
      end = start + 1;
    }
    pos = end;
  }
  pcre2_match_data_free(match);
  return pieces;
}

}  // namespace titan
