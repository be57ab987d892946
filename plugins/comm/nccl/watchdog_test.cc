// The watchdog and CommState against a fake NCCL defined here in place of nccl_library.cc, so
// they run without a GPU or libnccl: the fake records what was done with each communicator
// after ncclCommAbort freed it, and whether an abort ran while a launch was still inside NCCL.
//
// The watched operations have no completion event (done = nullptr). cudaEventQuery(nullptr)
// never answers cudaSuccess or cudaErrorNotReady: without a GPU (or a driver, as here) it returns
// cudaErrorInsufficientDriver or cudaErrorNoDevice, on a GPU an invalid-handle error. So every
// entry settles on its first check, the first as failed (which aborts the communicator) and the
// rest as aborted, whatever the machine.
#include "plugins/comm/nccl/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/comm/common/flight_recorder.h"
#include "plugins/comm/nccl/nccl_library.h"

namespace titan::nccl {
namespace {

// What one fake communicator went through.
struct FakeComm {
  std::atomic<bool> freed{false};
  std::atomic<int> aborts{0};
  std::atomic<int> used_after_free{0};  // calls that passed it after ncclCommAbort freed it
  std::atomic<bool> in_launch{false};
  std::atomic<bool> abort_attempted{false};  // set by the aborting thread before it calls Abort
  std::atomic<bool> aborted_during_launch{false};
  std::string record_path;  // a flight record to look for when aborted
  std::atomic<bool> record_before_abort{false};
};

FakeComm& Fake(ncclComm_t comm) { return *reinterpret_cast<FakeComm*>(comm); }
ncclComm_t Handle(FakeComm& fake) { return reinterpret_cast<ncclComm_t>(&fake); }
void Use(ncclComm_t comm) {
  if (Fake(comm).freed.load()) ++Fake(comm).used_after_free;
}

// Polls `done` until it holds or `limit` passes; the limits only keep a broken build from hanging.
void WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

ncclResult_t FakeGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  Use(comm);
  *state = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t FakeCommAbort(ncclComm_t comm) {
  Use(comm);
  FakeComm& fake = Fake(comm);
  if (fake.in_launch.load()) fake.aborted_during_launch.store(true);
  if (!fake.record_path.empty() && fake.aborts.load() == 0) {
    fake.record_before_abort.store(std::filesystem::exists(fake.record_path));
  }
  ++fake.aborts;
  fake.freed.store(true);
  return ncclSuccess;
}

ncclResult_t FakeCommFinalize(ncclComm_t comm) {
  Use(comm);
  return ncclSuccess;
}

ncclResult_t FakeCommDestroy(ncclComm_t comm) {
  Use(comm);
  Fake(comm).freed.store(true);
  return ncclSuccess;
}

const char* FakeErrorString(ncclResult_t) { return "fake nccl error"; }
const char* FakeLastError(ncclComm_t) { return ""; }

// A launch that stays inside NCCL until another thread is about to abort the communicator, then
// a second longer: an abort that does not wait for the launch runs within that second.
ncclResult_t FakeAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t comm,
                           cudaStream_t) {
  Use(comm);
  FakeComm& fake = Fake(comm);
  fake.in_launch.store(true);
  WaitFor([&] { return fake.abort_attempted.load(); }, std::chrono::seconds(10));
  WaitFor([&] { return fake.aborts.load() > 0; }, std::chrono::seconds(1));
  fake.in_launch.store(false);
  return ncclSuccess;
}

NcclLibrary MakeFakeLibrary() {
  NcclLibrary library;
  library.CommGetAsyncError = FakeGetAsyncError;
  library.CommAbort = FakeCommAbort;
  library.CommFinalize = FakeCommFinalize;
  library.CommDestroy = FakeCommDestroy;
  library.GetErrorString = FakeErrorString;
  library.GetLastError = FakeLastError;
  library.AllReduce = FakeAllReduce;
  return library;
}

const NcclLibrary fake_library = MakeFakeLibrary();

}  // namespace

const NcclLibrary& Nccl() { return fake_library; }
absl::StatusOr<const NcclLibrary*> LoadNccl() { return &fake_library; }

namespace {

ncclResult_t Launch(ncclComm_t comm) {
  return Nccl().AllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr);
}

// Three operations of one communicator: the first fails and aborts it; the watchdog must then
// settle the other two without asking the freed communicator for its asynchronous error. The
// flight record is written before the abort, which on a GPU waits for the device to go idle.
TEST(WatchdogTest, SettlesTheOtherOperationsWithoutTouchingTheAbortedCommunicator) {
  FakeComm fake;
  auto state = std::make_shared<CommState>(Handle(fake), nullptr);
  const std::string folder = ::testing::TempDir() + "titan_nccl_watchdog_trace";
  fake.record_path = folder + "/flight_recorder_rank0.json";
  std::filesystem::remove(fake.record_path);
  comm::FlightRecorder recorder(16, folder, 0);
  std::vector<absl::Status> results;
  {
    Watchdog watchdog(recorder, 0);
    std::vector<std::shared_ptr<Completion>> completions;
    for (int i = 1; i <= 3; ++i) {
      const int64_t handle =
          recorder.Start({i, "all-reduce", "world", 4, nullptr, comm::Clock::now(), {}, {}});
      completions.push_back(std::make_shared<Completion>());
      watchdog.Watch(
          {state, nullptr, handle, std::chrono::steady_clock::now() + std::chrono::seconds(100),
           std::chrono::seconds(100),
           absl::StrCat("rank 0: all-reduce #", i, " on world (1 ranks)"), completions.back()});
    }
    for (const auto& completion : completions) results.push_back(completion->Wait());
  }
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].code(), absl::StatusCode::kInternal) << results[0];
  EXPECT_NE(results[0].message().find("all-reduce #1 on world (1 ranks) failed: "),
            std::string::npos)
      << results[0];
  for (int i : {1, 2}) {
    EXPECT_EQ(results[i].code(), absl::StatusCode::kAborted) << results[i];
    EXPECT_NE(results[i].message().find("the communicator was aborted after rank 0: all-reduce #1"),
              std::string::npos)
        << results[i];
  }
  EXPECT_EQ(fake.aborts.load(), 1);
  EXPECT_TRUE(fake.record_before_abort.load()) << "the abort came before the flight record";
  EXPECT_EQ(fake.used_after_free.load(), 0);
  state.reset();  // the last owner goes: an aborted communicator is not finalized
  EXPECT_EQ(fake.used_after_free.load(), 0);
}

// The watchdog thread aborts while the training thread is inside an NCCL launch: the abort
// waits for the launch to return, and after it nothing reaches the freed communicator.
TEST(CommStateTest, AnAbortWaitsForTheLaunchInProgressAndEndsEveryUse) {
  FakeComm fake;
  CommState state(Handle(fake), nullptr);
  std::thread watchdog([&] {
    WaitFor([&] { return fake.in_launch.load(); }, std::chrono::seconds(10));
    fake.abort_attempted.store(true);
    state.Abort("rank 0: all-reduce #1 on world (1 ranks) did not complete within 1s");
  });
  ncclResult_t launched = ncclInternalError;
  EXPECT_TRUE(state.WithComm([&](ncclComm_t comm) { launched = Launch(comm); }));
  watchdog.join();
  EXPECT_EQ(launched, ncclSuccess);
  EXPECT_EQ(fake.aborts.load(), 1);
  EXPECT_FALSE(fake.aborted_during_launch.load());

  bool ran = false;
  EXPECT_FALSE(state.WithComm([&](ncclComm_t comm) {
    ran = true;
    Launch(comm);
  }));
  EXPECT_FALSE(ran);
  EXPECT_EQ(fake.used_after_free.load(), 0);
  EXPECT_EQ(state.broken(), "rank 0: all-reduce #1 on world (1 ranks) did not complete within 1s");
}

// A communicator that was never aborted is finalized and destroyed by its last owner, once.
TEST(CommStateTest, TheLastOwnerFinalizesAWorkingCommunicator) {
  FakeComm fake;
  { CommState state(Handle(fake), nullptr); }
  EXPECT_TRUE(fake.freed.load());
  EXPECT_EQ(fake.aborts.load(), 0);
  EXPECT_EQ(fake.used_after_free.load(), 0);
}

}  // namespace
}  // namespace titan::nccl
