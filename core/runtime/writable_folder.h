// Output folders are checked at start: a folder that cannot be written would otherwise be found
// only at the first checkpoint or profiled step, after hours of training.
#ifndef TITAN_CORE_RUNTIME_WRITABLE_FOLDER_H_
#define TITAN_CORE_RUNTIME_WRITABLE_FOLDER_H_

#include <string>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan {

// Creates `folder` if needed and writes and removes a probe file in it. An error names `key`
// (the recipe key that chose the folder), the folder and the reason.
absl::Status CheckWritableFolder(const std::string& folder, absl::string_view key);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_WRITABLE_FOLDER_H_
