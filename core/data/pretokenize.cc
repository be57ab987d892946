#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/data/pretokenize.h"

#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/data/unicode_classes.h"
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

// The property of a \p{X} escape at the start of `rest` that unicode_classes.h lists, and the
// escape's length; null if it is none of those.
std::pair<const unicode_classes::Property*, size_t> PropertyAt(absl::string_view rest) {
  for (const unicode_classes::Property& property : unicode_classes::kProperties) {
    const std::string escape = absl::StrCat("\\p{", property.name, "}");
    if (absl::StartsWith(rest, escape)) return {&property, escape.size()};
  }
  return {nullptr, 0};
}

// The length of the escape or \Q...\E quote at the start of `rest` (which starts with '\').
size_t EscapeLength(absl::string_view rest) {
  if (!absl::StartsWith(rest, "\\Q")) return std::min<size_t>(2, rest.size());
  const size_t end = rest.find("\\E", 2);
  return end == absl::string_view::npos ? rest.size() : end + 2;
}

// The bracket at the start of `rest` with the reference classes, and its length. PCRE2's
// \p{X} stays in it, its matching being fastest; code points added since are a second class
// tried only where the bracket fails ([a\p{L}] -> (?:[a\p{L}]|[added])), or excluded first
// from a negated one ([^a\p{L}] -> (?:(?![added])[^a\p{L}])).
std::pair<std::string, size_t> Bracket(absl::string_view rest) {
  const bool negated = absl::StartsWith(rest, "[^");
  size_t i = negated ? 2 : 1;
  if (i < rest.size() && rest[i] == ']') ++i;  // a ']' right after the opening is a member
  std::string members(rest.substr(0, i)), added;
  while (i < rest.size() && rest[i] != ']') {
    const absl::string_view at = rest.substr(i);
    if (absl::StartsWith(at, "\\s")) {
      absl::StrAppend(&members, unicode_classes::kWhiteSpace);
      i += 2;
      continue;
    }
    if (auto [property, escape] = PropertyAt(at); property != nullptr) {
      absl::StrAppend(&members,
                      property->whole != nullptr ? property->whole : at.substr(0, escape));
      absl::StrAppend(&added, property->added);
      i += escape;
      continue;
    }
    size_t length = 1;
    if (at[0] == '\\') {
      length = EscapeLength(at);
    } else if (absl::StartsWith(at, "[:")) {  // a POSIX class: [:alpha:]
      const size_t end = at.find(":]", 2);
      length = end == absl::string_view::npos ? 1 : end + 2;
    }
    absl::StrAppend(&members, at.substr(0, length));
    i += length;
  }
  if (i == rest.size()) return {std::string(rest), rest.size()};  // unclosed: PCRE2 says so
  absl::StrAppend(&members, "]");
  ++i;
  if (added.empty()) return {members, i};
  return {negated ? absl::StrCat("(?:(?![", added, "])", members, ")")
                  : absl::StrCat("(?:", members, "|[", added, "])"),
          i};
}

}  // namespace

std::string WithReferenceClasses(absl::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size();) {
    const absl::string_view rest = pattern.substr(i);
    size_t length = 1;
    std::string replacement;
    if (rest[0] == '[') {
      std::tie(replacement, length) = Bracket(rest);
    } else if (auto [property, escape] = PropertyAt(rest); property != nullptr) {
      const absl::string_view pcre2 = rest.substr(0, escape);
      length = escape;
      replacement = property->whole != nullptr ? absl::StrCat("[", property->whole, "]")
                    : *property->added == '\0'
                        ? std::string(pcre2)
                        : absl::StrCat("(?:", pcre2, "|[", property->added, "])");
    } else if (absl::StartsWith(rest, "\\s") || absl::StartsWith(rest, "\\S")) {
      length = 2;
      replacement = absl::StrCat(rest[1] == 's' ? "[" : "[^", unicode_classes::kWhiteSpace, "]");
    } else {
      length = rest[0] == '\\' ? EscapeLength(rest) : 1;
      replacement = std::string(rest.substr(0, length));
    }
    absl::StrAppend(&out, replacement);
    i += length;
  }
  return out;
}

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
  const std::string compiled = literal ? std::string(pattern) : WithReferenceClasses(pattern);
  impl->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                             options, &error, &offset, nullptr);
  if (impl->code == nullptr) {
    // Report the error where the pattern as given has it, not in the classes spelled out.
    pcre2_code* original = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                                         pattern.size(), options, &error, &offset, nullptr);
    pcre2_code_free(original);
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(absl::StrCat(
        "the pattern \"", pattern, "\" does not compile: ", reinterpret_cast<const char*>(message),
        " at offset ", offset,
        original != nullptr ? " (after its Unicode classes were spelled out)" : ""));
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
