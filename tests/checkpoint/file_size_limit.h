// A full disk without needing one: while a FileSizeLimit lives, files of this process stop
// growing at `bytes` (RLIMIT_FSIZE) and writes past it fail with EFBIG instead of SIGXFSZ.
#ifndef TITAN_TESTS_CHECKPOINT_FILE_SIZE_LIMIT_H_
#define TITAN_TESTS_CHECKPOINT_FILE_SIZE_LIMIT_H_

#include <sys/resource.h>

#include <csignal>

namespace titan::checkpoint_testing {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    previous_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, previous_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*previous_handler_)(int) = nullptr;
};

}  // namespace titan::checkpoint_testing

#endif  // TITAN_TESTS_CHECKPOINT_FILE_SIZE_LIMIT_H_
