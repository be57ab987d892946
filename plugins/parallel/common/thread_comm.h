// For tests: the ranks of a group as threads of one process. Each collective meets at a barrier
// and reads the others' buffers directly; point-to-point messages go through a mailbox.
#ifndef TITAN_PLUGINS_PARALLEL_COMMON_THREAD_COMM_H_
#define TITAN_PLUGINS_PARALLEL_COMMON_THREAD_COMM_H_

#include <algorithm>
#include <barrier>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "titan/communicator.h"

namespace titan {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), barrier_(size), buffers_(size) {}
  int size() const { return size_; }
  // Publishes this rank's buffer, waits for every rank's, runs `read`, and waits again so no
  // rank changes its buffer while another reads it.
  template <typename Read>
  void Exchange(int rank, const float* buffer, Read read) {
    buffers_[rank] = buffer;
    barrier_.arrive_and_wait();
    read(buffers_);
    barrier_.arrive_and_wait();
  }
  // A message from `from` to `to` with `tag`, queued in the order sent.
  void Post(int from, int to, int tag, std::vector<float> message) {
    std::lock_guard<std::mutex> lock(mutex_);
    mailbox_[{from, to, tag}].push_back(std::move(message));
    arrived_.notify_all();
  }
  std::vector<float> Take(int from, int to, int tag) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto& queue = mailbox_[{from, to, tag}];
    arrived_.wait(lock, [&] { return !queue.empty(); });
    std::vector<float> message = std::move(queue.front());
    queue.pop_front();
    return message;
  }

 private:
  int size_;
  std::barrier<> barrier_;
  std::vector<const float*> buffers_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<float>>> mailbox_;
};

class ThreadComm : public Communicator {
 public:
  ThreadComm(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  absl::Status AllReduce(TensorView buffer, ReduceOp op) override {
    const int64_t n = buffer.numel();
    std::vector<float> result(n);
    group_.Exchange(rank_, buffer.data_as<float>(), [&](const std::vector<const float*>& all) {
      for (int64_t i = 0; i < n; ++i) {
        float r = all[0][i];
        for (size_t k = 1; k < all.size(); ++k) {
          r = op == ReduceOp::kMax ? std::max(r, all[k][i]) : r + all[k][i];
        }
        result[i] = op == ReduceOp::kAvg ? r / static_cast<float>(all.size()) : r;
      }
    });
    std::memcpy(buffer.data, result.data(), n * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status ReduceScatter(const TensorView& input, TensorView output, ReduceOp) override {
    const int64_t n = output.numel();
    group_.Exchange(rank_, input.data_as<float>(), [&](const std::vector<const float*>& all) {
      for (int64_t i = 0; i < n; ++i) {
        float sum = 0;
        for (const float* b : all) sum += b[rank_ * n + i];
        output.data_as<float>()[i] = sum;
      }
    });
    return absl::OkStatus();
  }
  absl::Status AllGather(const TensorView& input, TensorView output) override {
    const int64_t n = input.numel();
    group_.Exchange(rank_, input.data_as<float>(), [&](const std::vector<const float*>& all) {
      for (size_t r = 0; r < all.size(); ++r) {
        std::memcpy(output.data_as<float>() + r * n, all[r], n * sizeof(float));
      }
    });
    return absl::OkStatus();
  }
  // A send is complete once posted; a receive takes its message when waited on.
  absl::StatusOr<std::unique_ptr<Transfer>> StartSend(const TensorView& buffer, int peer,
                                                      int tag) override {
    const float* data = buffer.data_as<float>();
    group_.Post(rank_, peer, tag, std::vector<float>(data, data + buffer.numel()));
    return std::unique_ptr<Transfer>(new Done());
  }
  absl::StatusOr<std::unique_ptr<Transfer>> StartRecv(TensorView buffer, int peer,
                                                      int tag) override {
    return std::unique_ptr<Transfer>(new Receive(group_, buffer, peer, rank_, tag));
  }
  absl::Status Broadcast(TensorView, int) override { return Unused(); }
  absl::Status Send(const TensorView&, int, int) override { return Unused(); }
  absl::Status Recv(TensorView, int, int) override { return Unused(); }
  absl::Status Barrier() override { return Unused(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int, int) override { return Unused(); }

 private:
  class Done : public Transfer {
   public:
    absl::Status Wait() override { return absl::OkStatus(); }
  };
  class Receive : public Transfer {
   public:
    Receive(ThreadGroup& group, TensorView buffer, int from, int to, int tag)
        : group_(group), buffer_(buffer), from_(from), to_(to), tag_(tag) {}
    ~Receive() override { Wait().IgnoreError(); }
    absl::Status Wait() override {
      if (done_) return absl::OkStatus();
      const std::vector<float> message = group_.Take(from_, to_, tag_);
      if (static_cast<int64_t>(message.size()) != buffer_.numel()) {
        return absl::InternalError("thread comm: a message of another size");
      }
      std::memcpy(buffer_.data, message.data(), message.size() * sizeof(float));
      done_ = true;
      return absl::OkStatus();
    }

   private:
    ThreadGroup& group_;
    TensorView buffer_;
    int from_, to_, tag_;
    bool done_ = false;
  };
  static absl::Status Unused() { return absl::UnimplementedError("not needed by this test"); }
  ThreadGroup& group_;
  int rank_;
};

}  // namespace titan

#endif  // TITAN_PLUGINS_PARALLEL_COMMON_THREAD_COMM_H_
