// The nccl plugin's stream order against fake CUDA calls that log what they were asked: no GPU.
#include "plugins/comm/nccl/stream_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace titan::nccl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> log;
cudaError_t wait_answer = cudaSuccess;

// Streams and events are small numbers standing for handles.
std::string Name(const void* handle) {
  const auto n = reinterpret_cast<uintptr_t>(handle);
  if (n == 1) return "compute";
  if (n == 2) return "comm";
  return absl::StrCat("event ", n);
}
template <typename T>
T Handle(uintptr_t n) {
  return reinterpret_cast<T>(n);
}

cudaError_t FakeRecord(cudaEvent_t event, cudaStream_t stream) {
  log.push_back(absl::StrCat("record ", Name(event), " on ", Name(stream)));
  return cudaSuccess;
}
cudaError_t FakeWait(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  log.push_back(absl::StrCat(Name(stream), " waits for ", Name(event)));
  return wait_answer;
}
const StreamCalls kFake{FakeRecord, FakeWait};

class StreamOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log.clear();
    wait_answer = cudaSuccess;
  }
  cudaStream_t compute_ = Handle<cudaStream_t>(1), comm_ = Handle<cudaStream_t>(2);
  cudaEvent_t ready_ = Handle<cudaEvent_t>(10);
};

TEST_F(StreamOrderTest, WithoutEventsTheCallWaitsForTheWholeComputeStream) {
  ASSERT_TRUE(OrderBefore(kFake, compute_, comm_, {}, ready_).ok());
  EXPECT_THAT(log, ElementsAre("record event 10 on compute", "comm waits for event 10"));
}

// The producer's events only: nothing is recorded on the compute stream, so the call does not
// wait for the kernels queued after the producers (the unit computing while fsdp prefetches).
TEST_F(StreamOrderTest, WithTheBuffersEventsTheCallWaitsForThoseAlone) {
  const EventHandle produced[] = {Handle<EventHandle>(21), Handle<EventHandle>(22)};
  ASSERT_TRUE(OrderBefore(kFake, compute_, comm_, produced, ready_).ok());
  EXPECT_THAT(log, ElementsAre("comm waits for event 21", "comm waits for event 22"));
}

TEST_F(StreamOrderTest, TheComputeStreamWaitsAtOnceUnlessTheCallerDefersIt) {
  const cudaEvent_t done[] = {Handle<cudaEvent_t>(31), Handle<cudaEvent_t>(32)};
  ASSERT_TRUE(OrderAfter(kFake, compute_, comm_, {done, 1}, /*defer=*/false).ok());
  EXPECT_THAT(log, ElementsAre("record event 31 on comm", "compute waits for event 31"));
  log.clear();
  ASSERT_TRUE(OrderAfter(kFake, compute_, comm_, done, /*defer=*/true).ok());
  EXPECT_THAT(log, ElementsAre("record event 31 on comm", "record event 32 on comm"));
}

TEST_F(StreamOrderTest, AFailedCallIsNamed) {
  wait_answer = cudaErrorInvalidResourceHandle;
  const EventHandle produced[] = {Handle<EventHandle>(21), Handle<EventHandle>(22)};
  absl::Status ordered = OrderBefore(kFake, compute_, comm_, produced, ready_);
  EXPECT_THAT(ordered.message(), HasSubstr("cudaStreamWaitEvent failed"));
  EXPECT_THAT(log, ElementsAre("comm waits for event 21"));  // stops at the first failure
}

}  // namespace
}  // namespace titan::nccl
