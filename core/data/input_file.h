// Checks on an input path before it is opened, and places in input text, so that a message says
// what the input is and where it is wrong instead of what a stream happened to throw.
#ifndef TITAN_CORE_DATA_INPUT_FILE_H_
#define TITAN_CORE_DATA_INPUT_FILE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan {

enum class InputKind { kFile, kFolder };

// What `path` names when it is a regular file, or a folder and `folder_ok`; otherwise an error
// naming the path, what it is (missing, a folder, a FIFO, a device, a name a NUL byte cuts short)
// and what was `expected` ("a tokenizer file").
absl::StatusOr<InputKind> InspectInput(const std::string& path, bool folder_ok,
                                       absl::string_view expected);

// "line:column" (both from 1) of byte `offset` of `text`; an offset past the end names the end.
std::string LineColumn(absl::string_view text, size_t offset);

}  // namespace titan

#endif  // TITAN_CORE_DATA_INPUT_FILE_H_
