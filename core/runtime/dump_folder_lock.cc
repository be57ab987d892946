#include "core/runtime/dump_folder_lock.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace titan {
namespace {

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::string Now() {
  const std::time_t now = std::time(nullptr);
  char text[32] = {};
  std::tm utc;
  gmtime_r(&now, &utc);
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string ReadAll(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t n = 0;
  off_t offset = 0;
  while ((n = pread(fd, buffer, sizeof(buffer), offset)) > 0) {
    text.append(buffer, static_cast<size_t>(n));
    offset += n;
  }
  return text;
}

// "pid 12 on host h (started ...)" from a record; the raw text (cut short) when it is not one.
std::string DescribeHolder(const std::string& record) {
  const nlohmann::json holder = nlohmann::json::parse(record, nullptr, /*allow_exceptions=*/false);
  if (holder.is_object() && holder.contains("pid") && holder["pid"].is_number_integer() &&
      holder.contains("host") && holder["host"].is_string() && holder.contains("started") &&
      holder["started"].is_string()) {
    return absl::StrCat("pid ", holder["pid"].get<int64_t>(), " on host ",
                        holder["host"].get<std::string>(), " (started ",
                        holder["started"].get<std::string>(), ")");
  }
  return absl::StrCat("an unreadable record (", record.size(), " bytes)");
}

}  // namespace

absl::StatusOr<DumpFolderLock> DumpFolderLock::Acquire(const std::string& folder) {
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("job.dump_folder = \"", folder, "\": cannot create it: ", error.message()));
  }
  const std::string path = (std::filesystem::path(folder) / "titan-run.lock").string();
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("job.dump_folder = \"", folder,
                                                      "\": cannot create its lock file ", path,
                                                      ": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int lock_error = errno;
    const std::string record = ReadAll(fd);
    close(fd);
    if (lock_error == EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat(
          "job.dump_folder = \"", folder, "\" is in use by another run: ",
          record.empty() ? "a process that has not yet written its record" : DescribeHolder(record),
          " holds ", path,
          ". Two runs in one folder would mix their metrics and checkpoints: wait for that run "
          "to end, or give this one another job.dump_folder"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "job.dump_folder = \"", folder, "\": cannot lock ", path, ": ", std::strerror(lock_error)));
  }
  DumpFolderLock lock(path, fd);
  const std::string previous = ReadAll(fd);
  if (!previous.empty()) lock.stale_holder_ = DescribeHolder(previous);
  const std::string record =
      nlohmann::json{
          {"pid", static_cast<int64_t>(getpid())}, {"host", HostName()}, {"started", Now()}}
          .dump() +
      "\n";
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, record.data(), record.size(), 0) != static_cast<ssize_t>(record.size())) {
    return absl::InternalError(
        absl::StrCat("cannot write the lock record ", path, ": ", std::strerror(errno)));
  }
  return lock;
}

DumpFolderLock::DumpFolderLock(DumpFolderLock&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), stale_holder_(std::move(other.stale_holder_)) {
  other.fd_ = -1;
}

DumpFolderLock& DumpFolderLock::operator=(DumpFolderLock&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    stale_holder_ = std::move(other.stale_holder_);
    other.fd_ = -1;
  }
  return *this;
}

DumpFolderLock::~DumpFolderLock() { Release(); }

// An empty file is a lock released cleanly; the file itself stays, since removing it would let
// a run waiting on the old inode and one creating a new file both think they hold the lock.
void DumpFolderLock::Release() {
  if (fd_ < 0) return;
  (void)!ftruncate(fd_, 0);
  close(fd_);  // releases the flock
  fd_ = -1;
}

absl::StatusOr<std::optional<DumpFolderLock>> LockDumpFolderForJob(const std::string& folder,
                                                                   Communicator& world) {
  std::optional<DumpFolderLock> lock;
  absl::Status status;
  if (world.rank() == 0) {
    absl::StatusOr<DumpFolderLock> taken = DumpFolderLock::Acquire(folder);
    if (taken.ok()) {
      lock = std::move(*taken);
    } else {
      status = taken.status();
    }
  }
  int32_t code = status.raw_code();
  TITAN_RETURN_IF_ERROR(
      world.AllReduce(TensorView{&code, DType::kI32, Device{}, {1}, {}}, ReduceOp::kMax));
  if (!status.ok()) return status;
  if (code != 0) {
    return absl::Status(static_cast<absl::StatusCode>(code),
                        absl::StrCat("rank 0 could not lock job.dump_folder = \"", folder,
                                     "\" for this job (its log says why)"));
  }
  if (lock && !lock->stale_holder().empty()) {
    spdlog::warn(
        "[job] {} was left by {}, which ended without releasing it (killed, or its machine "
        "lost): this run takes the folder over",
        lock->path(), lock->stale_holder());
  }
  return lock;
}

}  // namespace titan
