#include "core/runtime/writable_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace titan {

absl::Status CheckWritableFolder(const std::string& folder, absl::string_view key) {
  auto refuse = [&](const std::string& reason) {
    return absl::FailedPreconditionError(absl::StrCat(
        key, ": cannot write in ", folder, ": ", reason,
        " (checked at start, so that the run does not find it at its first write there)"));
  };
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) return refuse(absl::StrCat("cannot create it: ", error.message()));
  if (!std::filesystem::is_directory(folder, error)) return refuse("it is not a folder");
  const std::string probe =
      (std::filesystem::path(folder) / absl::StrCat(".titan-write-check-", getpid())).string();
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return refuse(absl::StrCat("cannot create a file there: ", std::strerror(errno)));
  const bool written = write(fd, "x", 1) == 1;
  const int write_error = errno;
  close(fd);
  unlink(probe.c_str());
  if (!written)
    return refuse(absl::StrCat("cannot write a file there: ", std::strerror(write_error)));
  return absl::OkStatus();
}

}  // namespace titan
