// UTF-8 validity (RFC 3629), header-only so that core/data uses it without linking the runtime.
#ifndef TITAN_CORE_RUNTIME_UTF8_H_
#define TITAN_CORE_RUNTIME_UTF8_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace titan {

// The length of the well-formed UTF-8 character at the start of `s`, 0 if none (or `s` is
// empty): the same test PCRE2 applies to find invalid UTF-8.
inline size_t Utf8CharLength(absl::string_view s) {
  if (s.empty()) return 0;
  const auto lead = static_cast<unsigned char>(s[0]);
  if (lead < 0x80) return 1;
  size_t length;
  uint32_t smallest;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, smallest = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, smallest = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, smallest = 0x10000;
  } else {
    return 0;
  }
  if (s.size() < length) return 0;
  uint32_t code = lead & (0x7Fu >> length);
  for (size_t i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(s[i]);
    if ((next & 0xC0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3Fu);
  }
  if (code < smallest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

inline bool IsUtf8(absl::string_view s) {
  for (size_t i = 0, length; i < s.size(); i += length) {
    if ((length = Utf8CharLength(s.substr(i))) == 0) return false;
  }
  return true;
}

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_UTF8_H_
