#include "plugins/parallel/common/comm_stream.h"

#include <gtest/gtest.h>

#include <new>
#include <vector>

namespace titan::parallel {
namespace {

TEST(CommStream, RunsTasksInTheOrderEnqueued) {
  std::vector<int> order;  // touched only by the stream's thread until the last future is ready
  std::vector<std::shared_future<absl::Status>> done;
  {
    CommStream stream;
    for (int i = 0; i < 100; ++i) {
      done.push_back(stream.Enqueue([&order, i] {
        order.push_back(i);
        return absl::OkStatus();
      }));
    }
    EXPECT_TRUE(done.back().get().ok());
  }
  std::vector<int> expected(100);
  for (int i = 0; i < 100; ++i) expected[i] = i;
  EXPECT_EQ(order, expected);
}

TEST(CommStream, ReturnsEachTasksStatusAndTurnsExceptionsIntoErrors) {
  CommStream stream;
  auto failed = stream.Enqueue([] { return absl::DeadlineExceededError("all-gather #3"); });
  auto threw = stream.Enqueue([]() -> absl::Status { throw std::bad_alloc(); });
  auto fine = stream.Enqueue([] { return absl::OkStatus(); });
  EXPECT_EQ(failed.get().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(threw.get().code(), absl::StatusCode::kInternal);
  EXPECT_NE(threw.get().message().find("communication task"), std::string::npos);
  EXPECT_TRUE(fine.get().ok());
}

TEST(CommStream, FinishesQueuedTasksBeforeItStops) {
  int ran = 0;
  {
    CommStream stream;
    for (int i = 0; i < 10; ++i) {
      stream.Enqueue([&ran] {
        ++ran;
        return absl::OkStatus();
      });
    }
  }
  EXPECT_EQ(ran, 10);
}

}  // namespace
}  // namespace titan::parallel
