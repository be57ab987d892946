#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/data/pretokenize.h"

#include <pcre2.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/runtime/utf8.h"

namespace titan {

const char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// Text between matches: one piece per run of valid UTF-8, one per invalid byte.
void AddGap(absl::string_view gap, std::vector<absl::string_view>& pieces) {
  size_t run = 0;
  for (size_t i = 0; i < gap.size();) {
    const size_t length = Utf8CharLength(gap.substr(i));
    if (length > 0) {
      i += length;
      continue;
    }
    if (i > run) pieces.push_back(gap.substr(run, i - run));
    pieces.push_back(gap.substr(i, 1));
    run = ++i;
  }
  if (gap.size() > run) pieces.push_back(gap.substr(run));
}

}  // namespace

struct PreTokenizer::Impl {
  ~Impl() { pcre2_code_free(code); }
  pcre2_code* code = nullptr;
  SplitBehavior behavior = SplitBehavior::kIsolated;
};

absl::StatusOr<PreTokenizer> PreTokenizer::Create(absl::string_view pattern, bool literal,
                                                  SplitBehavior behavior) {
  auto impl = std::make_unique<Impl>();
  impl->behavior = behavior;
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2 refuses UCP beside LITERAL, and a literal has no character classes for it to affect.
  const uint32_t options =
      PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  impl->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                             &error, &offset, nullptr);
  if (impl->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat(
        "the pattern \"", pattern, "\" does not compile: ", reinterpret_cast<const char*>(message),
        " at offset ", offset));
  }
  uint32_t min_length = 0;
  pcre2_pattern_info(impl->code, PCRE2_INFO_MINLENGTH, &min_length);
  if (min_length == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the pattern \"", pattern, "\" can match the empty string; expected one that cannot"));
  }
  pcre2_jit_compile(impl->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
  return PreTokenizer(std::move(impl));
}

PreTokenizer::PreTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PreTokenizer::PreTokenizer() {
  absl::StatusOr<PreTokenizer> llama3 =
      Create(kLlama3Pattern, /*literal=*/false, SplitBehavior::kIsolated);
  // The pattern is a constant: failing to compile it is a bug in this file, not bad input.
  if (!llama3.ok()) throw std::logic_error(std::string(llama3.status().message()));
  impl_ = std::move(llama3->impl_);
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

std::vector<absl::string_view> PreTokenizer::Split(absl::string_view text) const {
  std::vector<absl::string_view> pieces;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = text.size(), end = text.size();
    // Create refuses patterns that can match the empty string; were one to, the rest would be
    // text between matches rather than a loop that never ends.
    if (pcre2_match(impl_->code, subject, text.size(), pos, 0, match, nullptr) > 0) {
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
      if (ovector[1] > ovector[0]) start = ovector[0], end = ovector[1];
    }
    AddGap(text.substr(pos, start - pos), pieces);
    if (end > start && impl_->behavior == SplitBehavior::kIsolated) {
      pieces.push_back(text.substr(start, end - start));
    }
    pos = end;
  }
  pcre2_match_data_free(match);
  return pieces;
}

}  // namespace titan
