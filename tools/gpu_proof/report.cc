#include "tools/gpu_proof/report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace titan::gpu_proof {
namespace {

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

}  // namespace

absl::Status WriteJsonAtomically(const std::string& path, const Json& value) {
  const std::string text = value.dump(1) + "\n";
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", temporary);
  for (size_t written = 0; written < text.size();) {
    ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status error = ErrnoError("cannot write", temporary);
      close(fd);
      std::remove(temporary.c_str());
      return error;
    }
    written += n;
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    absl::Status error = ErrnoError("cannot sync", temporary);
    std::remove(temporary.c_str());
    return error;
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    absl::Status error = ErrnoError("cannot rename the report onto", path);
    std::remove(temporary.c_str());
    return error;
  }
  std::string folder = std::filesystem::path(path).parent_path().string();
  int folder_fd = open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder_fd >= 0) {
    fsync(folder_fd);
    close(folder_fd);
  }
  return absl::OkStatus();
}

std::string LogPathFor(const std::string& report_path) {
  if (absl::EndsWith(report_path, ".json")) {
    return report_path.substr(0, report_path.size() - 5) + ".log";
  }
  return report_path + ".log";
}

}  // namespace titan::gpu_proof
