// One run per dump folder: two runs writing the same metrics.jsonl and checkpoints (a requeued
// job while the old one still runs) would interleave their histories past telling apart.
#ifndef TITAN_CORE_RUNTIME_DUMP_FOLDER_LOCK_H_
#define TITAN_CORE_RUNTIME_DUMP_FOLDER_LOCK_H_

#include <optional>
#include <string>

#include "titan/communicator.h"
#include "titan/status.h"

namespace titan {

// An exclusive flock(2) on <folder>/titan-run.lock, which records its holder (pid, host, start
// time). The kernel releases the lock when its process ends, however it ends, so a lock is
// never left held by a dead process; a killed holder leaves only its record in the file, which
// the next run finds and names as a stale lock it takes over.
class DumpFolderLock {
 public:
  // Creates `folder` if needed and takes its lock. Unavailable, naming the holder's pid, host
  // and start time, when another process holds it; another error, naming the file, when the
  // file cannot be created or locked.
  static absl::StatusOr<DumpFolderLock> Acquire(const std::string& folder);

  DumpFolderLock(DumpFolderLock&& other) noexcept;
  DumpFolderLock& operator=(DumpFolderLock&& other) noexcept;
  DumpFolderLock(const DumpFolderLock&) = delete;
  DumpFolderLock& operator=(const DumpFolderLock&) = delete;
  // Clears the record and releases the lock.
  ~DumpFolderLock();

  const std::string& path() const { return path_; }
  // The record of a holder that ended without releasing the lock ("pid 12 on host h, started
  // ..."), found when it was taken over; empty when there was none.
  const std::string& stale_holder() const { return stale_holder_; }

 private:
  DumpFolderLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  void Release();

  std::string path_;
  int fd_ = -1;
  std::string stale_holder_;
};

// Collective over `world`: rank 0 takes the lock of the job's dump folder, logging a stale one
// it takes over; when it cannot, every rank returns an error of the same code, so that all
// stop. The other ranks hold nothing (nullopt).
absl::StatusOr<std::optional<DumpFolderLock>> LockDumpFolderForJob(const std::string& folder,
                                                                   Communicator& world);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_DUMP_FOLDER_LOCK_H_
