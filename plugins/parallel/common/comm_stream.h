// A FIFO of communication tasks run by one background thread, so collectives overlap with the
// compute of the thread that enqueues them (like a CUDA stream for a communicator). Tasks run
// in the order they were enqueued, which keeps every rank's collectives in the same order.
#ifndef TITAN_PLUGINS_PARALLEL_COMMON_COMM_STREAM_H_
#define TITAN_PLUGINS_PARALLEL_COMMON_COMM_STREAM_H_

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "titan/status.h"

namespace titan::parallel {

class CommStream {
 public:
  CommStream() : worker_([this] { Work(); }) {}
  ~CommStream() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_one();
    worker_.join();
  }
  CommStream(const CommStream&) = delete;
  CommStream& operator=(const CommStream&) = delete;

  // Runs `task` after every task enqueued before it; the future holds its status.
  std::shared_future<absl::Status> Enqueue(std::function<absl::Status()> task) {
    // An exception must not escape into the future's get(): it becomes the task's status.
    std::packaged_task<absl::Status()> packaged([task = std::move(task)]() -> absl::Status {
      try {
        return task();
      } catch (const std::exception& e) {
        return absl::InternalError(absl::StrCat("communication task: ", e.what()));
      }
    });
    std::shared_future<absl::Status> done = packaged.get_future().share();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(packaged));
    }
    ready_.notify_one();
    return done;
  }

 private:
  void Work() {
    for (;;) {
      std::packaged_task<absl::Status()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping, and nothing left to run
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<absl::Status()>> tasks_;
  bool stopping_ = false;
  std::thread worker_;  // last: starts after the members it uses exist
};

}  // namespace titan::parallel

#endif  // TITAN_PLUGINS_PARALLEL_COMMON_COMM_STREAM_H_
