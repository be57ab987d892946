#include "core/data/input_file.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

const char* KindName(fs::file_type type) {
  switch (type) {
    case fs::file_type::directory:
      return "a folder";
    case fs::file_type::fifo:
      return "a FIFO (named pipe)";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "of an unknown kind";
  }
}

}  // namespace

absl::StatusOr<InputKind> InspectInput(const std::string& path, bool folder_ok,
                                       absl::string_view expected) {
  const std::string shown = absl::StrCat("\"", absl::CEscape(path), "\"");
  // The system reads a name up to its first NUL: "/tmp\0x" would open /tmp.
  if (const size_t nul = path.find('\0'); nul != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(shown, ": the path has a NUL byte at offset ",
                                                   nul, ", which no file name can hold; expected ",
                                                   expected));
  }
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) {
    const bool dangling = fs::is_symlink(fs::symlink_status(path, error));
    return absl::NotFoundError(
        absl::StrCat(shown, dangling ? ": a symbolic link to nothing" : ": no such file or folder",
                     "; expected ", expected));
  }
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat(shown, ": cannot inspect it (", error.message(), "); expected ", expected));
  }
  if (status.type() == fs::file_type::regular) return InputKind::kFile;
  if (status.type() == fs::file_type::directory && folder_ok) return InputKind::kFolder;
  const char* instead = folder_ok ? ", not a regular file or folder"
                        : status.type() == fs::file_type::directory ? ""
                                                                    : ", not a regular file";
  return absl::InvalidArgumentError(
      absl::StrCat(shown, " is ", KindName(status.type()), instead, "; expected ", expected));
}

std::string LineColumn(absl::string_view text, size_t offset) {
  const size_t end = std::min(offset, text.size());
  const size_t line = 1 + std::count(text.begin(), text.begin() + end, '\n');
  const size_t newline = end == 0 ? absl::string_view::npos : text.rfind('\n', end - 1);
  const size_t column = newline == absl::string_view::npos ? end + 1 : end - newline;
  return absl::StrCat(line, ":", column);
}

}  // namespace titan
