// LaunchGroup against a fake NCCL defined here in place of nccl_library.cc, which records each
// call: no GPU or libnccl needed.
#include "plugins/comm/nccl/group_launch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/comm/nccl/nccl_library.h"

namespace titan::nccl {
namespace {

std::vector<std::string> calls;
ncclResult_t recv_answer = ncclSuccess;  // what the fake ncclRecv returns
ncclResult_t end_answer = ncclSuccess;   // what the fake ncclGroupEnd returns

ncclResult_t FakeGroupStart() {
  calls.push_back("GroupStart");
  return ncclSuccess;
}
ncclResult_t FakeGroupEnd() {
  calls.push_back("GroupEnd");
  return end_answer;
}
ncclResult_t FakeSend(const void* data, size_t count, ncclDataType_t type, int peer, ncclComm_t,
                      cudaStream_t stream) {
  calls.push_back(absl::StrCat("Send ", reinterpret_cast<uintptr_t>(data), " ", count,
                               type == ncclUint8 ? " bytes" : " ?", " to ", peer, " on ",
                               reinterpret_cast<uintptr_t>(stream)));
  return ncclSuccess;
}
ncclResult_t FakeRecv(void* data, size_t count, ncclDataType_t type, int peer, ncclComm_t,
                      cudaStream_t stream) {
  calls.push_back(absl::StrCat("Recv ", reinterpret_cast<uintptr_t>(data), " ", count,
                               type == ncclUint8 ? " bytes" : " ?", " from ", peer, " on ",
                               reinterpret_cast<uintptr_t>(stream)));
  return recv_answer;
}

NcclLibrary MakeFakeLibrary() {
  NcclLibrary library;
  library.GroupStart = FakeGroupStart;
  library.GroupEnd = FakeGroupEnd;
  library.Send = FakeSend;
  library.Recv = FakeRecv;
  return library;
}

const NcclLibrary fake_library = MakeFakeLibrary();

}  // namespace

const NcclLibrary& Nccl() { return fake_library; }
absl::StatusOr<const NcclLibrary*> LoadNccl() { return &fake_library; }

namespace {

using ::testing::ElementsAre;

void* At(uintptr_t address) { return reinterpret_cast<void*>(address); }
cudaStream_t Stream() { return reinterpret_cast<cudaStream_t>(uintptr_t{77}); }

class GroupLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    calls.clear();
    recv_answer = end_answer = ncclSuccess;
  }
};

TEST_F(GroupLaunchTest, OneGroupHoldsEveryMessageInTheOrderGiven) {
  const std::vector<NcclMessage> messages = {{true, At(100), 16, 1},
                                             {false, At(200), 32, 1},
                                             {false, At(300), 8, 2},
                                             {true, At(400), 4, 2}};
  EXPECT_EQ(LaunchGroup(messages, nullptr, Stream()), ncclSuccess);
  EXPECT_THAT(calls, ElementsAre("GroupStart", "Send 100 16 bytes to 1 on 77",
                                 "Recv 200 32 bytes from 1 on 77", "Recv 300 8 bytes from 2 on 77",
                                 "Send 400 4 bytes to 2 on 77", "GroupEnd"));
}

TEST_F(GroupLaunchTest, AFailedCallStopsTheGroupButStillClosesIt) {
  recv_answer = ncclInvalidArgument;
  const std::vector<NcclMessage> messages = {
      {true, At(100), 16, 1}, {false, At(200), 32, 1}, {true, At(300), 8, 2}};
  EXPECT_EQ(LaunchGroup(messages, nullptr, Stream()), ncclInvalidArgument);
  EXPECT_THAT(calls, ElementsAre("GroupStart", "Send 100 16 bytes to 1 on 77",
                                 "Recv 200 32 bytes from 1 on 77", "GroupEnd"));
}

// A non-blocking communicator answers ncclInProgress: the rest of the group is still issued,
// and the group's end is what the caller waits on.
TEST_F(GroupLaunchTest, InProgressIsNotAFailure) {
  recv_answer = ncclInProgress;
  end_answer = ncclInProgress;
  const std::vector<NcclMessage> messages = {{false, At(200), 32, 1}, {true, At(300), 8, 1}};
  EXPECT_EQ(LaunchGroup(messages, nullptr, Stream()), ncclInProgress);
  EXPECT_THAT(calls, ElementsAre("GroupStart", "Recv 200 32 bytes from 1 on 77",
                                 "Send 300 8 bytes to 1 on 77", "GroupEnd"));
}

}  // namespace
}  // namespace titan::nccl
