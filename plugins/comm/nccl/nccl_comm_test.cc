// The nccl plugin on one rank (no launcher: MPI starts as a singleton). On a machine without a
// GPU only the refusal runs; the rest skips, naming why. Two ranks cannot share one GPU under
// NCCL, so sends and receives between ranks are left to multi-GPU machines.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "core/runtime/plugin_registry.h"
#include "plugins/comm/nccl/nccl_library.h"
#include "tests/support/plugin_dir.h"
#include "titan/comm.h"
#include "titan/device.h"

namespace titan {
namespace {

PluginRegistry& Registry() {
  static PluginRegistry* registry = PluginRegistry::Discover({testing::TestPluginDir()})->release();
  return *registry;
}

std::string TraceFolder() { return ::testing::TempDir() + "titan_nccl_trace"; }

std::unique_ptr<CommPlugin> Nccl(int64_t train_timeout) {
  auto plugin = Registry().Create<CommPlugin>("nccl");
  EXPECT_TRUE(plugin.ok()) << plugin.status();
  std::map<std::string, ConfigView::Entry> entries = {
      {"init_timeout_seconds", {int64_t{60}, "test"}},
      {"train_timeout_seconds", {train_timeout, "test"}},
      {"trace_folder", {TraceFolder(), "test"}}};
  EXPECT_TRUE((*plugin)->Configure(ConfigView("comm", entries)).ok());
  return std::move(*plugin);
}

int CudaDevices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

TEST(NcclCommTest, LoadsAndRefusesClearlyWithoutAGpuOrACudaDevice) {
  auto nccl = Nccl(100);
  absl::StatusOr<std::unique_ptr<Communicator>> world = nccl->ConnectWorld(JoinOptions{});
  ASSERT_FALSE(world.ok());
  EXPECT_EQ(world.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string expected =
      CudaDevices() == 0 ? "no CUDA device is visible" : "needs job.device = \"cuda\"";
  EXPECT_NE(world.status().message().find(expected), std::string::npos) << world.status();
}

// The plugin is built only where CMake found libnccl, so the library loads here, GPU or not.
TEST(NcclLibraryTest, LoadsLibncclAndBindsEveryFunction) {
  absl::StatusOr<const nccl::NcclLibrary*> library = nccl::LoadNccl();
  ASSERT_TRUE(library.ok()) << library.status();
  const nccl::NcclLibrary& nccl = **library;
  for (const void* function :
       {reinterpret_cast<const void*>(nccl.GetUniqueId),
        reinterpret_cast<const void*>(nccl.CommInitRankConfig),
        reinterpret_cast<const void*>(nccl.CommGetAsyncError),
        reinterpret_cast<const void*>(nccl.CommAbort),
        reinterpret_cast<const void*>(nccl.CommFinalize),
        reinterpret_cast<const void*>(nccl.CommDestroy),
        reinterpret_cast<const void*>(nccl.GetLastError),
        reinterpret_cast<const void*>(nccl.ReduceScatter),
        reinterpret_cast<const void*>(nccl.AllGather),
        reinterpret_cast<const void*>(nccl.Broadcast), reinterpret_cast<const void*>(nccl.Send),
        reinterpret_cast<const void*>(nccl.Recv), reinterpret_cast<const void*>(nccl.GroupStart),
        reinterpret_cast<const void*>(nccl.GroupEnd)}) {
    EXPECT_NE(function, nullptr);
  }
  EXPECT_EQ(std::string(nccl.GetErrorString(ncclInvalidArgument)).rfind("invalid argument", 0), 0u);
  EXPECT_EQ(nccl.file.front(), '/') << nccl.file;
  EXPECT_NE(nccl.file.find("libnccl.so.2"), std::string::npos) << nccl.file;
  ASSERT_NE(nccl.AllReduce, nullptr);
}

// The cuda device, selected, with its compute; skips without a GPU.
class NcclOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDevices() == 0) GTEST_SKIP() << "no CUDA device: the nccl plugin's GPU tests need one";
    auto device = Registry().Create<DevicePlugin>("cuda");
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(*device);
    ASSERT_TRUE(device_->Select(0).ok());
    ASSERT_NE(device_->compute(), nullptr) << "the cuda device plugin has no compute";
  }

  TensorView Upload(const std::vector<float>& values) {
    void* data = device_->Allocate(values.size() * sizeof(float)).value();
    allocations_.push_back(data);
    EXPECT_TRUE(device_->CopyToDevice(data, values.data(), values.size() * sizeof(float)).ok());
    return TensorView{
        data, DType::kF32, Device{DeviceType::kCuda, 0}, {static_cast<int64_t>(values.size())}, {}};
  }
  std::vector<float> Download(const TensorView& view) {
    EXPECT_TRUE(device_->compute()->Synchronize().ok());
    std::vector<float> values(static_cast<size_t>(view.numel()));
    EXPECT_TRUE(device_->CopyToHost(values.data(), view.data, view.nbytes()).ok());
    return values;
  }
  void TearDown() override {
    for (void* data : allocations_) device_->Free(data).IgnoreError();
  }

  std::unique_ptr<DevicePlugin> device_;
  std::vector<void*> allocations_;
};

TEST_F(NcclOnGpu, CollectivesOnOneRank) {
  auto nccl = Nccl(100);
  JoinOptions options;
  options.device = device_.get();
  auto world = nccl->ConnectWorld(options);
  ASSERT_TRUE(world.ok()) << world.status();
  Communicator& comm = **world;
  ASSERT_EQ(comm.size(), 1);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    TensorView v = Upload({1.5f, -2.0f, 3.0f});
    ASSERT_TRUE(comm.AllReduce(v, op).ok());
    EXPECT_EQ(Download(v), (std::vector<float>{1.5f, -2.0f, 3.0f}));
  }
  TensorView in = Upload({4.0f, 5.0f}), out = Upload({0.0f, 0.0f});
  ASSERT_TRUE(comm.AllGather(in, out).ok());
  EXPECT_EQ(Download(out), (std::vector<float>{4.0f, 5.0f}));
  TensorView scattered = Upload({0.0f, 0.0f});
  ASSERT_TRUE(comm.ReduceScatter(in, scattered, ReduceOp::kSum).ok());
  EXPECT_EQ(Download(scattered), (std::vector<float>{4.0f, 5.0f}));
  ASSERT_TRUE(comm.Broadcast(in, 0).ok());
  EXPECT_TRUE(comm.Barrier().ok());
  // Host buffers are refused, naming the call.
  std::vector<float> host(2);
  absl::Status refused = comm.AllReduce(FlatF32(host.data(), 2), ReduceOp::kSum);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("all-reduce on world"), std::string::npos) << refused;
  // A split forms its own NCCL communicator.
  auto split = comm.Split(0, 0);
  ASSERT_TRUE(split.ok()) << split.status();
  TensorView w = Upload({7.0f});
  ASSERT_TRUE((*split)->AllReduce(w, ReduceOp::kSum).ok());
  EXPECT_EQ(Download(w), std::vector<float>{7.0f});
}

// Set by the host function when its sleep ends.
std::atomic<bool> sleep_ended{false};
void CUDART_CB SleepThreeSeconds(void*) {
  std::this_thread::sleep_for(std::chrono::seconds(3));
  sleep_ended.store(true);
}

// The compute stream is held up longer than the train timeout: the watchdog aborts the
// communicator, the flight record says what timed out, and later calls are refused. The held
// operation reduces nothing, so NCCL queues no kernel that the abort could leave stuck.
//
// For the all-reduce to be queued behind the sleep, while it sleeps:
// - Every buffer is uploaded before the sleep. Upload is a pageable cudaMemcpy on CUDA's legacy
//   default stream, which waits for the work queued on every blocking stream (the compute
//   stream is one, so that it orders after the device's own copies and fills); an upload after
//   the sleep would hold the host until the sleep had ended, and the all-reduce queued then
//   would wait for nothing.
// - The sleep goes on the compute's own stream, the one the all-reduce waits for. The compute
//   creates it at its first call; until then current_stream() is null, the legacy stream, so a
//   Synchronize makes it first.
// The sleep must still be running when the timeout is recorded: otherwise the all-reduce was
// queued after it and the record came from something else.
TEST_F(NcclOnGpu, WatchdogAbortsAnOperationPastTheTimeout) {
  auto nccl = Nccl(1);
  JoinOptions options;
  options.device = device_.get();
  auto world = nccl->ConnectWorld(options);
  ASSERT_TRUE(world.ok()) << world.status();
  (*world)->UseTrainTimeout();
  const std::string record_path = TraceFolder() + "/flight_recorder_rank0.json";
  std::filesystem::remove(record_path);
  TensorView empty = Upload({0.0f});
  empty.shape = {0};
  TensorView v = Upload({1.0f});
  ASSERT_TRUE(device_->compute()->Synchronize().ok());
  auto stream = static_cast<cudaStream_t>(device_->compute()->current_stream());
  ASSERT_NE(stream, nullptr) << "the cuda compute made no stream of its own";
  sleep_ended.store(false);
  ASSERT_EQ(cudaLaunchHostFunc(stream, SleepThreeSeconds, nullptr), cudaSuccess);
  ASSERT_TRUE((*world)->AllReduce(empty, ReduceOp::kSum).ok());  // queued behind the sleep
  for (int i = 0; i < 200 && !std::filesystem::exists(record_path); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const bool ended_before_the_record = sleep_ended.load();
  EXPECT_FALSE(ended_before_the_record)
      << "the sleep had ended before the timeout was recorded: the all-reduce was not held";
  std::ifstream record(record_path);
  std::string text((std::istreambuf_iterator<char>(record)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("timed out"), std::string::npos) << text;
  absl::Status after = (*world)->AllReduce(v, ReduceOp::kSum);
  EXPECT_EQ(after.code(), absl::StatusCode::kAborted) << after;
  EXPECT_NE(after.message().find("did not complete within 1s"), std::string::npos) << after;
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);  // the sleep ends; nothing is stuck
  EXPECT_TRUE(sleep_ended.load());
}

// A started all-gather waits for the event of its input alone: it completes while the compute
// stream is still held by a later sleep, which a gather queued after the whole compute stream
// could not. Its result is read on a stream of the test's own that waits for nothing.
TEST_F(NcclOnGpu, AStartedAllGatherWaitsForItsInputsEventNotTheComputeStream) {
  auto nccl = Nccl(100);
  JoinOptions options;
  options.device = device_.get();
  auto world = nccl->ConnectWorld(options);
  ASSERT_TRUE(world.ok()) << world.status();
  TensorView in = Upload({4.0f, 5.0f}), out = Upload({0.0f, 0.0f});
  Compute& compute = *device_->compute();
  ASSERT_TRUE(compute.Synchronize().ok());  // makes the compute's own stream
  auto stream = static_cast<cudaStream_t>(compute.current_stream());
  absl::StatusOr<EventHandle> written = compute.RecordEvent(stream);
  ASSERT_TRUE(written.ok()) << written.status();
  sleep_ended.store(false);
  ASSERT_EQ(cudaLaunchHostFunc(stream, SleepThreeSeconds, nullptr), cudaSuccess);
  auto started = (*world)->StartAllGather(in, out, StreamOrder{{*written}});
  ASSERT_TRUE(started.ok()) << started.status();
  cudaStream_t reader = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking), cudaSuccess);
  std::vector<float> seen(2, 0.0f);
  for (int i = 0; i < 200 && seen != std::vector<float>{4.0f, 5.0f}; ++i) {
    ASSERT_EQ(cudaMemcpyAsync(seen.data(), out.data, out.nbytes(), cudaMemcpyDeviceToHost, reader),
              cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(reader), cudaSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(seen, (std::vector<float>{4.0f, 5.0f}));
  EXPECT_FALSE(sleep_ended.load()) << "the gather waited for the compute stream's sleep";
  ASSERT_TRUE((*started)->Wait().ok());  // the compute stream waits for the gather from here
  EXPECT_TRUE(compute.SynchronizeEvent(*written).ok());
  EXPECT_EQ(Download(out), (std::vector<float>{4.0f, 5.0f}));
  EXPECT_TRUE(sleep_ended.load());
  cudaStreamDestroy(reader);
}

}  // namespace
}  // namespace titan
